//! The `canvas` tool's pages on `toolgate serve --http`: [`toolgate_browser::canvas::Canvas`]
//! answers a request as plain values (`Canvas::handle`), and this adapter turns them into HTTP
//! responses at `/canvas`, authenticated by the route itself ([`RouteAuth::Own`]): the token in
//! the path is the capability, since the user's browser has no bearer token to send.

use std::sync::Arc;

use futures::future::BoxFuture;
use toolgate_browser::canvas::{Canvas, Reply, Served};
use toolgate_mcp::{HttpBody, HttpRoute, Mount, RouteAuth, RouteRequest, reply};

/// The mount serving `canvas`'s boards. While it is alive (a server holds it), the canvas
/// pushes changes to open pages instead of writing the stdio mode's files.
pub(crate) fn mount(canvas: Arc<Canvas>) -> Mount {
    let served = canvas.served();
    Mount::new("/canvas", RouteAuth::Own, Arc::new(CanvasRoute { canvas, _served: served }))
}

#[derive(Debug)]
struct CanvasRoute {
    canvas: Arc<Canvas>,
    /// Keeps the canvas in its served mode for as long as the server holds this route.
    _served: Arc<Served>,
}

impl HttpRoute for CanvasRoute {
    fn serve(&self, req: RouteRequest) -> BoxFuture<'static, http::Response<HttpBody>> {
        let response = match self.canvas.handle(req.method.as_str(), req.uri.path()) {
            Reply::Page(page) => {
                let mut response = reply::bytes(page.status, page.content_type, page.body);
                for (name, value) in page.headers {
                    if let Ok(value) = http::HeaderValue::from_str(&value) {
                        response.headers_mut().insert(name, value);
                    }
                }
                response
            }
            Reply::Events(events) => {
                let mut response = reply::sse(events);
                response.headers_mut().insert("referrer-policy", http::HeaderValue::from_static("no-referrer"));
                response
            }
        };
        Box::pin(async move { response })
    }
}
