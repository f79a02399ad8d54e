//! Placeholder until the leak-detector benchmark lands.
fn main() {}
