//! Any text: reading it must not panic, and a script that reads must print
//! to one that reads back to the same fusion (`check_any_text` asserts it).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Invalid UTF-8 becomes U+FFFD so that every input reaches the reader.
    let text = String::from_utf8_lossy(data);
    let _ = fusebench_frontend::check_any_text(&text);
});
