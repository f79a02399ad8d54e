//! Unit tests of the analysis as a whole; the big table is in `tests/shell_table.rs`.

use super::*;

#[test]
fn smoke() {
    let a = analyze("echo ok && rm -rf x");
    assert_eq!(a.class, CommandClass::Dangerous);
}
