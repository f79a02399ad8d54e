//! The HTTP client the bridge hands to rmcp's Streamable HTTP transport for an OAuth server.
//!
//! rmcp's [`AuthClient`] adds the bearer token (refreshing it first when it is about to expire)
//! and, when the server answers 401 to a token, refreshes once and retries once. What it lets
//! through after that (a second 401, or a 401 with nothing to refresh) is turned here into an
//! error that tells the user to sign in again.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::{AuthClient, AuthError};
use rmcp::transport::streamable_http_client::{StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse};

/// What the user is told when a server no longer accepts toolgate's credentials.
pub fn login_required_message(server: &str) -> String {
    format!(
        "MCP server `{server}` did not accept toolgate's OAuth token (it was rejected again after a refresh, or could not be refreshed); run `toolgate mcp login {server}` to sign in again"
    )
}

/// A Streamable HTTP client that signs requests with server `NAME`'s stored OAuth token: pass it
/// to `StreamableHttpClientTransport::with_client`. Built by
/// [`authorized_client`](super::authorized_client).
#[derive(Clone)]
pub struct AuthorizedClient {
    inner: AuthClient<reqwest::Client>,
    server: Arc<str>,
}

impl std::fmt::Debug for AuthorizedClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorizedClient").field("server", &self.server).finish_non_exhaustive()
    }
}

type Error = StreamableHttpError<reqwest::Error>;

impl AuthorizedClient {
    pub(crate) fn new(inner: AuthClient<reqwest::Client>, server: &str) -> Self {
        AuthorizedClient { inner, server: server.into() }
    }

    /// The server's name in the config.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The current access token, refreshed first when it is about to expire: for transports that
    /// add the header themselves (legacy SSE). Never log it.
    pub async fn access_token(&self) -> Result<String, AuthError> {
        self.inner.get_access_token().await
    }

    /// A 401 that survived rmcp's one refresh + retry becomes the sign-in-again error.
    fn explain<T>(&self, result: Result<T, Error>) -> Result<T, Error> {
        match result {
            Err(StreamableHttpError::AuthRequired(_)) => Err(self.login_required()),
            // A 401 without a `WWW-Authenticate` header arrives as a plain status error.
            Err(StreamableHttpError::Client(e)) if e.status() == Some(reqwest::StatusCode::UNAUTHORIZED) => {
                Err(self.login_required())
            }
            Err(StreamableHttpError::Auth(AuthError::AuthorizationRequired)) => Err(self.login_required()),
            other => other,
        }
    }

    fn login_required(&self) -> Error {
        StreamableHttpError::Auth(AuthError::AuthorizationFailed(login_required_message(&self.server)))
    }
}

impl StreamableHttpClient for AuthorizedClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        self.explain(self.inner.post_message(uri, message, session_id, auth_header, custom_headers).await)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let result = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.explain(result)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        self.explain(self.inner.delete_session(uri, session_id, auth_header, custom_headers).await)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>, Error> {
        // Unchanged: rmcp stops reconnecting a stream on `AuthRequired` (and would keep retrying
        // on other errors); the request that needs the server reports the sign-in error.
        self.inner.get_stream(uri, session_id, last_event_id, auth_header, custom_headers).await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>, Error> {
        self.inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}
