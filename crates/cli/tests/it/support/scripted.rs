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
use toolgate_testkit::receiver::{Receiver, Response};

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

/// The server.
#[derive(Debug, Clone)]
pub struct Scripted {
    pub url: String,
    replies: Arc<Mutex<VecDeque<Reply>>>,
    receiver: Arc<Receiver>,
}

impl Scripted {
    pub async fn start(replies: Vec<Reply>) -> Scripted {
        Self::serve(replies, None)
    }

    /// A server that answers every request with `respond(body)`, concurrently: the reply
    /// depends on the request (which agent's system prompt, its last message), not on the order.
    pub async fn by_request(respond: Respond) -> Scripted {
        Self::serve(Vec::new(), Some(respond))
    }

    /// Called inside the test's runtime: `respond`'s futures run on it (they may sleep on its
    /// timers), each blocking only its own connection's thread.
    fn serve(replies: Vec<Reply>, respond: Option<Respond>) -> Scripted {
        let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
        let runtime = tokio::runtime::Handle::current();
        let script = replies.clone();
        let receiver = Receiver::start(move |request| {
            let body = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
            let reply = match &respond {
                Some(respond) => runtime.block_on(respond(body)),
                None => script.lock().unwrap().pop_front().unwrap_or_else(|| answer("(script exhausted)")),
            };
            render(reply)
        });
        Scripted { url: receiver.url("/v1"), replies, receiver: Arc::new(receiver) }
    }

    /// Adds replies at the end of the script.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.replies.lock().unwrap().extend(replies);
    }

    /// Every request body so far (`null` for one that is not JSON).
    pub fn requests(&self) -> Vec<Value> {
        self.receiver.requests().iter().map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null)).collect()
    }
}

/// The HTTP response for `reply`; the connection stays open for the client's next turn.
fn render(reply: Reply) -> Response {
    let response =
        |code: u16, ty: &str, body: String| Response::new(code).header("content-type", ty).body(body).keep_alive();
    match reply {
        Reply::Json(v) => response(200, "application/json", v.to_string()),
        Reply::Status(code) => response(code, "text/plain", "scripted failure".to_owned()),
        Reply::Delay(d, inner) => {
            std::thread::sleep(d);
            render(*inner)
        }
        Reply::Stream(chunks) => {
            let mut body = String::new();
            for c in chunks {
                body.push_str(&format!("data: {c}\n\n"));
            }
            body.push_str("data: [DONE]\n\n");
            response(200, "text/event-stream", body)
        }
    }
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
