//! A scripted OpenAI-compatible Chat Completions server on loopback: it stands in for the model
//! only, playing back the given reply bodies in order and recording every request body.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// The server; it runs until the test process ends.
#[derive(Debug)]
pub struct Scripted {
    /// `http://127.0.0.1:PORT/v1`.
    pub url: String,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl Scripted {
    /// Starts a server that answers with `replies` (Chat Completions bodies), in order.
    pub fn start(replies: Vec<Value>) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let url = format!("http://{}/v1", listener.local_addr().expect("local address"));
        let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (replies, requests) = (replies.clone(), recorded.clone());
                std::thread::spawn(move || serve(stream, &replies, &requests));
            }
        });
        Scripted { url, requests }
    }

    /// Every request body so far.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().expect("requests").clone()
    }
}

/// One connection: requests one after another (keep-alive), each answered with the next reply.
fn serve(stream: TcpStream, replies: &Mutex<VecDeque<Value>>, requests: &Mutex<Vec<Value>>) -> std::io::Result<()> {
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut len = 0;
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                len = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; len];
        reader.read_exact(&mut body)?;
        requests.lock().expect("requests").push(serde_json::from_slice(&body).unwrap_or(Value::Null));
        let reply = replies.lock().expect("replies").pop_front().unwrap_or_else(|| answer("(script exhausted)"));
        let text = reply.to_string();
        write!(
            writer,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
            text.len()
        )?;
    }
}

/// A reply whose message is `message`.
fn reply(message: Value) -> Value {
    json!({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})
}

/// A final answer (or, in `--json-schema` mode, the JSON step written as text).
pub fn answer(text: &str) -> Value {
    reply(json!({"role": "assistant", "content": text}))
}

/// Native tool calls, each a name and its arguments; ids `call_1`, `call_2`, ...
pub fn calls(calls: &[(&str, Value)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"id": format!("call_{}", i + 1), "type": "function",
                   "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    reply(json!({"role": "assistant", "content": null, "tool_calls": calls}))
}
