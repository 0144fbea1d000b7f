//! Storage element types of the float8 and complex dtypes, and UInt64's
//! `Elem` (its i64 lanes hold the same 64 bits).
//!
//! Each float8 element holds its 8-bit encoding; lanes read it as the f64 it
//! encodes. A complex element is `[re, im]`; lanes (which hold one real
//! number) see its real part, which is what casting it to a real type gives.
//! Complex arithmetic runs in `complex.rs`, never in lanes.

use crate::tensor::{Buffer, Elem};
use fusebench_ir::round;

macro_rules! f8_type {
    ($T:ident, $var:ident, $value:path, $bits:path, $round:path, $store:expr) => {
        #[derive(Clone, Copy, Default, PartialEq, Debug)]
        pub struct $T(pub u8);
        impl $T {
            pub fn to_f64(self) -> f64 {
                $value(self.0)
            }
            /// The nearest element to `x` (rounded as a cast rounds).
            pub fn from_f64_rounded(x: f64) -> Self {
                $T($bits($round(x)))
            }
        }
        impl Elem for $T {
            const FLOAT: bool = true;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                $value(self.0)
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                $value(self.0) as i64
            }
            #[inline(always)]
            fn from_f64(x: f64) -> Self {
                // Callers pass representable values; rounding again is a no-op then
                // (an e5m2 infinity, which only a copy delivers, is kept).
                $T($store(x))
            }
            #[inline(always)]
            fn from_i64(x: i64) -> Self {
                $T($bits($round(x as f64)))
            }
            fn wrap(v: Vec<Self>) -> Buffer {
                Buffer::$var(v)
            }
            fn slice(b: &Buffer) -> &[Self] {
                match b {
                    Buffer::$var(v) => v,
                    _ => unreachable!("buffer is not {}", stringify!($T)),
                }
            }
            fn zeros(n: usize) -> Vec<Self> {
                vec![$T(0); n]
            }
        }
    };
}

f8_type!(F8E4m3, F8E4m3, round::f8e4m3_value, round::f8e4m3_bits, round::to_f8e4m3, |x| round::f8e4m3_bits(round::to_f8e4m3(x)));
f8_type!(F8E5m2, F8E5m2, round::f8e5m2_value, round::f8e5m2_bits, round::to_f8e5m2, round::f8e5m2_store_bits);
f8_type!(F8E8m0, F8E8m0, round::f8e8m0_value, e8m0_bits_of_value, round::to_f8e8m0, |x| e8m0_bits_of_value(round::to_f8e8m0(x)));

/// e8m0 bits of a value it holds (a power of two or NaN).
fn e8m0_bits_of_value(x: f64) -> u8 {
    round::f8e8m0_bits(x)
}

impl Elem for u64 {
    const FLOAT: bool = false;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    /// The same bits: integer lanes hold UInt64 as its bit pattern.
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline(always)]
    fn from_f64(x: f64) -> Self {
        x as u64
    }
    #[inline(always)]
    fn from_i64(x: i64) -> Self {
        x as u64
    }
    fn wrap(v: Vec<Self>) -> Buffer {
        Buffer::U64(v)
    }
    fn slice(b: &Buffer) -> &[Self] {
        match b {
            Buffer::U64(v) => v,
            _ => unreachable!("buffer is not u64"),
        }
    }
    fn zeros(n: usize) -> Vec<Self> {
        vec![0; n]
    }
}

macro_rules! complex_type {
    ($T:ident, $P:ty, $var:ident) => {
        /// `[re, im]`, laid out as CUDA's struct of two parts and as PyTorch stores it.
        #[derive(Clone, Copy, Default, PartialEq, Debug)]
        #[repr(C)]
        pub struct $T(pub [$P; 2]);
        impl Elem for $T {
            const FLOAT: bool = true;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self.0[0] as f64
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self.0[0] as i64
            }
            #[inline(always)]
            fn from_f64(x: f64) -> Self {
                $T([x as $P, 0.0])
            }
            #[inline(always)]
            fn from_i64(x: i64) -> Self {
                $T([x as $P, 0.0])
            }
            fn wrap(v: Vec<Self>) -> Buffer {
                Buffer::$var(v)
            }
            fn slice(b: &Buffer) -> &[Self] {
                match b {
                    Buffer::$var(v) => v,
                    _ => unreachable!("buffer is not {}", stringify!($T)),
                }
            }
            fn zeros(n: usize) -> Vec<Self> {
                vec![$T([0.0, 0.0]); n]
            }
        }
    };
}

complex_type!(C64, f32, C64);
complex_type!(C128, f64, C128);
