//! Benchmark placeholder: replaced by the grep/glob vs ripgrep comparison.
fn main() {}
