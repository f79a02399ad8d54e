//! A scripted OpenAI-compatible Chat Completions server on loopback. It stands in for the model
//! only: it plays back the given assistant turns and tool calls, in order, or ([`Scripted::by_request`])
//! answers each request by a function of it, for agents that run at once and whose requests
//! arrive in no fixed order; it records every request body. Everything else in these tests
//! (gate, runtime, HTTP client, store) is real.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// One scripted reply.
#[derive(Debug, Clone)]
pub enum Reply {
    /// 200 with this Chat Completions body.
    Json(Value),
    /// This status with a text body.
    Status(u16),
    /// Wait, then reply.
    Delay(Duration, Box<Reply>),
    /// 200 as server-sent events: one `data:` line per chunk, then `[DONE]`.
    Stream(Vec<Value>),
}

/// Answers one request body (the function of [`Scripted::by_request`]).
pub type Respond = Arc<dyn Fn(Value) -> Pin<Box<dyn Future<Output = Reply> + Send>> + Send + Sync>;

#[derive(Clone)]
struct Responder(Respond);

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Responder")
    }
}

/// The server.
#[derive(Debug, Clone)]
pub struct Scripted {
    pub url: String,
    replies: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<Vec<Value>>>,
    respond: Option<Responder>,
}

impl Scripted {
    pub async fn start(replies: Vec<Reply>) -> Scripted {
        Self::serve(replies, None).await
    }

    /// A server that answers every request with `respond(body)`, concurrently: the reply
    /// depends on the request (which agent's system prompt, its last message), not on the order.
    pub async fn by_request(respond: Respond) -> Scripted {
        Self::serve(Vec::new(), Some(Responder(respond))).await
    }

    async fn serve(replies: Vec<Reply>, respond: Option<Responder>) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let s = Scripted {
            url,
            replies: Arc::new(Mutex::new(replies.into())),
            requests: Arc::new(Mutex::new(Vec::new())),
            respond,
        };
        let server = s.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let server = server.clone();
                tokio::spawn(async move {
                    let _ = server.connection(sock).await;
                });
            }
        });
        s
    }

    /// Adds replies at the end of the script.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.replies.lock().unwrap().extend(replies);
    }

    /// Every request body so far.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    async fn connection(&self, sock: tokio::net::TcpStream) -> std::io::Result<()> {
        let mut reader = BufReader::new(sock);
        loop {
            let mut len = 0usize;
            let mut line = String::new();
            if reader.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            loop {
                line.clear();
                reader.read_line(&mut line).await?;
                let l = line.trim_end();
                if l.is_empty() {
                    break;
                }
                if let Some((k, v)) = l.split_once(':')
                    && k.eq_ignore_ascii_case("content-length")
                {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; len];
            reader.read_exact(&mut body).await?;
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            self.requests.lock().unwrap().push(body.clone());
            let reply = match &self.respond {
                Some(Responder(f)) => f(body).await,
                None => self.replies.lock().unwrap().pop_front().unwrap_or_else(|| answer("(script exhausted)")),
            };
            let out = render(reply).await;
            reader.get_mut().write_all(&out).await?;
        }
    }
}

fn render(reply: Reply) -> std::pin::Pin<Box<dyn std::future::Future<Output = Vec<u8>> + Send>> {
    Box::pin(async move {
        match reply {
            Reply::Json(v) => response(200, "application/json", &v.to_string()),
            Reply::Status(code) => response(code, "text/plain", "scripted failure"),
            Reply::Delay(d, inner) => {
                tokio::time::sleep(d).await;
                render(*inner).await
            }
            Reply::Stream(chunks) => {
                let mut body = String::new();
                for c in chunks {
                    body.push_str(&format!("data: {c}\n\n"));
                }
                body.push_str("data: [DONE]\n\n");
                response(200, "text/event-stream", &body)
            }
        }
    })
}

fn response(code: u16, ty: &str, body: &str) -> Vec<u8> {
    format!("HTTP/1.1 {code} X\r\ncontent-type: {ty}\r\ncontent-length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

/// A final answer.
pub fn answer(text: &str) -> Reply {
    Reply::Json(json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }))
}

/// One tool call with raw argument text.
pub fn call_raw(name: &str, arguments: &str) -> Reply {
    Reply::Json(json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{}", uuid_like()), "type": "function", "function": {"name": name, "arguments": arguments}}
        ]}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 8},
    }))
}

/// One tool call.
pub fn call(name: &str, args: Value) -> Reply {
    call_raw(name, &args.to_string())
}

/// Several tool calls in one assistant turn.
pub fn calls(list: &[(&str, Value)]) -> Reply {
    let calls: Vec<Value> = list
        .iter()
        .map(|(name, args)| {
            json!({"id": format!("call_{}", uuid_like()), "type": "function",
                   "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    Reply::Json(json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": calls},
                     "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 8},
    }))
}

fn uuid_like() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(1);
    N.fetch_add(1, Ordering::Relaxed)
}
