//! sqlite-vec, compiled into this binary and registered with the bundled SQLite, and the blob
//! format of stored vectors.

use std::sync::Once;

/// Registers sqlite-vec as an automatic extension of every SQLite connection opened after this
/// call (once per process).
#[allow(unsafe_code)]
pub(crate) fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `sqlite3_vec_init` is sqlite-vec's extension entry point, compiled with
        // SQLITE_CORE against the SQLite that rusqlite bundles, so its real signature is SQLite's
        // `int (*)(sqlite3*, char**, const sqlite3_api_routines*)`; the crate declares it without
        // parameters, hence the transmute to the type `sqlite3_auto_extension` expects.
        // `sqlite3_auto_extension` is thread-safe and only stores the pointer, which lives for the
        // whole process.
        unsafe {
            let init: unsafe extern "C" fn(
                *mut rusqlite::ffi::sqlite3,
                *mut *mut std::os::raw::c_char,
                *const rusqlite::ffi::sqlite3_api_routines,
            ) -> std::os::raw::c_int = std::mem::transmute(sqlite_vec::sqlite3_vec_init as *const ());
            rusqlite::ffi::sqlite3_auto_extension(Some(init));
        }
    });
}

/// A vector as the little-endian `f32` blob sqlite-vec reads.
pub(crate) fn to_blob(v: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 4);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}
