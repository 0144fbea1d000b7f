//! Counts in messages: "1 kernel", "2 kernels", never "kernel(s)".

/// `n word`, the word in the plural unless n is 1 ("1 kernel", "2 kernels").
pub fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(super::plural(1, "kernel"), "1 kernel");
        assert_eq!(super::plural(0, "sample"), "0 samples");
        assert_eq!(super::plural(2, "input"), "2 inputs");
    }
}
