//! One HTML page served on loopback, and a workspace that may reach exactly that address: what
//! the browser family's tests through the binary (`browser.rs`, `capture.rs`) open.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};

/// Serves `page` as every path on 127.0.0.1 (a free port) from a thread.
pub fn serve(page: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = stream.write_all(reply.as_bytes());
            });
        }
    });
    addr
}

/// A workspace whose `[web] allow_private` is exactly `addr` (the page server's port, nothing
/// else private).
pub fn workspace(addr: SocketAddr) -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("toolgate.toml"), format!("[web]\nallow_private = [\"{addr}\"]\n")).unwrap();
    ws
}
