//! Traces over OTLP (issue 29 item 6, `docs/gateway.md` "Traces"), through the binary: a
//! `toolgate call` configured with `[telemetry] otlp_endpoint` sends its `tool_call` span and
//! one child per pipeline stage to the collector, with the tool and the decision and never a
//! parameter's value; a collector that is not there costs the call nothing but a log line.
//!
//! A `toolgate serve` starts the exporter's thread only when configured, and exports the calls
//! real MCP clients make.
//!
//! No OpenTelemetry collector is installable here: [`Collector`] stands in for one. It is a
//! loopback HTTP/1.1 server that takes OTLP/HTTP export requests (`POST /v1/traces`) and
//! decodes them as the protocol's documented protobuf messages, with the `opentelemetry-proto`
//! types.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use toolgate_testkit::serve::HttpServer;

use crate::support::python;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// One export request as the collector received it.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    content_type: String,
    body: Vec<u8>,
}

/// A stand-in for an OpenTelemetry collector's OTLP/HTTP receiver on loopback.
struct Collector {
    port: u16,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Collector {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&received);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let into = Arc::clone(&into);
                std::thread::spawn(move || serve_connection(stream, &into));
            }
        });
        Self { port, received }
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

/// Reads HTTP/1.1 requests off one (kept-alive) connection and answers each with an empty
/// success, as a collector does.
fn serve_connection(stream: TcpStream, into: &Mutex<Vec<Received>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let path = request_line.split_whitespace().nth(1).unwrap_or_default().to_owned();
        let (mut length, mut content_type) = (0usize, String::new());
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap(),
                "content-type" => content_type = value.trim().to_owned(),
                "transfer-encoding" => panic!("the exporter sent a chunked body: {value}"),
                _ => {}
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        into.lock().unwrap().push(Received { path, content_type, body });
        let answer = "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n";
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// A workspace whose `toolgate.toml` is `config`.
fn workspace(config: &str) -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("toolgate.toml"), config).unwrap();
    ws
}

/// `toolgate call TOOL PARAMS` in `ws`, with no `OTEL_*` variable from the test's environment.
fn call(ws: &Path, tool: &str, params: &str) -> Output {
    let mut cmd = Command::new(TOOLGATE);
    cmd.arg("--workspace").arg(ws).args(["--approval", "never", "call", tool, params]);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("OTEL_") {
            cmd.env_remove(name);
        }
    }
    cmd.output().unwrap()
}

fn telemetry(port: u16) -> String {
    format!("[telemetry]\notlp_endpoint = \"http://127.0.0.1:{port}\"\nservice_name = \"toolgate-test\"\n")
}

/// Every span of every export request, with its resource's service name.
fn spans(received: &[Received]) -> Vec<(String, Span)> {
    let mut out = Vec::new();
    for request in received {
        assert_eq!(request.path, "/v1/traces", "{request:?}");
        assert_eq!(request.content_type, "application/x-protobuf", "{request:?}");
        let export = ExportTraceServiceRequest::decode(request.body.as_slice()).expect("an OTLP export request");
        for resource in export.resource_spans {
            let attributes = resource.resource.map(|r| r.attributes).unwrap_or_default();
            let service = text(&attributes, "service.name").unwrap_or_default();
            for scope in resource.scope_spans {
                out.extend(scope.spans.into_iter().map(|s| (service.clone(), s)));
            }
        }
    }
    out
}

/// The string attribute `key`, if there is one.
fn text(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| match &kv.value {
        Some(AnyValue { value: Some(any_value::Value::StringValue(s)) }) => Some(s.clone()),
        _ => None,
    })
}

/// The call span of `spans` (there must be exactly one) and its children's stage names.
fn call_and_stages(spans: &[(String, Span)]) -> (&Span, Vec<String>) {
    let calls: Vec<&Span> = spans.iter().map(|(_, s)| s).filter(|s| s.name == "tool_call").collect();
    assert_eq!(calls.len(), 1, "{spans:#?}");
    let call = calls[0];
    assert!(call.parent_span_id.is_empty(), "the call span is a root: {call:?}");
    let stages = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.parent_span_id == call.span_id)
        .inspect(|s| assert_eq!(s.trace_id, call.trace_id, "{s:?}"))
        .map(|s| s.name.clone())
        .collect();
    (call, stages)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_call_is_traced_with_its_stages_and_never_its_parameters() {
    let collector = Collector::start();
    let ws = workspace(&telemetry(collector.port));
    // A secret-looking value and a plain marker: neither may leave in a span.
    let secret = "ghp_0123456789abcdefABCDEF0123456789abcd";
    let params = format!(r#"{{"message": "zebra-marker-7731 {secret}"}}"#);
    let out = call(ws.path(), "echo", &params);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("zebra-marker-7731"), "{out:?}");

    let received = collector.received();
    assert!(!received.is_empty(), "the exporter sent nothing: {}", stderr(&out));
    let spans = spans(&received);
    let (call, stages) = call_and_stages(&spans);
    assert!(spans.iter().all(|(service, _)| service == "toolgate-test"), "{spans:#?}");
    assert_eq!(text(&call.attributes, "tool").as_deref(), Some("echo"), "{call:#?}");
    assert_eq!(text(&call.attributes, "outcome").as_deref(), Some("ok"), "{call:#?}");
    assert!(text(&call.attributes, "decision").is_some(), "{call:#?}");
    assert!(text(&call.attributes, "approval").is_some(), "{call:#?}");
    assert!(call.end_time_unix_nano > call.start_time_unix_nano, "{call:#?}");
    // The stages in the order the pipeline runs them (pipeline/mod.rs).
    let expected = [
        "resolve",
        "visibility",
        "validate",
        "loop_breaker",
        "skill_scope",
        "policy",
        "rate_limits",
        "concurrency",
        "pre_hooks",
        "approval",
        "execute",
        "output",
        "post_hooks",
        "audit",
    ];
    let mut ordered: Vec<(&Span, &String)> = Vec::new();
    for (_, span) in &spans {
        if span.parent_span_id == call.span_id {
            ordered.push((span, &span.name));
        }
    }
    ordered.sort_by_key(|(s, _)| s.start_time_unix_nano);
    let ordered: Vec<&str> = ordered.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(ordered, expected, "{stages:?}");

    for request in &received {
        for needle in [secret.as_bytes(), b"zebra-marker-7731".as_slice(), b"ghp_".as_slice()] {
            assert!(
                !request.body.windows(needle.len()).any(|w| w == needle),
                "a parameter's value was exported: {}",
                String::from_utf8_lossy(needle)
            );
        }
    }
}

#[test]
fn a_denied_call_shows_the_deny_decision() {
    let collector = Collector::start();
    let config = format!("{}\n[tools]\ndeny = [\"read(secrets/**)\"]\n", telemetry(collector.port));
    let ws = workspace(&config);
    std::fs::create_dir(ws.path().join("secrets")).unwrap();
    std::fs::write(ws.path().join("secrets/key.txt"), "hunter2").unwrap();
    let out = call(ws.path(), "read", r#"{"path": "secrets/key.txt"}"#);
    assert!(!out.status.success(), "the rule denies the call: {out:?}");

    let received = collector.received();
    let spans = spans(&received);
    let (call, stages) = call_and_stages(&spans);
    assert_eq!(text(&call.attributes, "tool").as_deref(), Some("read"), "{call:#?}");
    assert_eq!(text(&call.attributes, "decision").as_deref(), Some("deny"), "{call:#?}");
    assert_eq!(text(&call.attributes, "outcome").as_deref(), Some("denied"), "{call:#?}");
    // It ended in the policy stage, which says so; nothing ran.
    assert!(stages.contains(&"policy".to_owned()) && !stages.contains(&"execute".to_owned()), "{stages:?}");
    let policy = spans.iter().map(|(_, s)| s).find(|s| s.name == "policy").unwrap();
    assert_eq!(text(&policy.attributes, "outcome").as_deref(), Some("denied"), "{policy:#?}");
    for request in &received {
        for needle in [b"secrets/key.txt".as_slice(), b"hunter2".as_slice()] {
            assert!(!request.body.windows(needle.len()).any(|w| w == needle), "{}", String::from_utf8_lossy(needle));
        }
    }
}

#[test]
fn an_unreachable_collector_neither_fails_nor_holds_the_call() {
    // A port nobody listens on: the connection is refused.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let ws = workspace(&telemetry(port));
    let out = call(ws.path(), "echo", r#"{"message": "still answered"}"#);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "still answered", "{out:?}");
    assert!(stderr(&out).contains("traces: the OTLP collector could not be reached"), "{}", stderr(&out));
    assert!(stderr(&out).contains("these spans are dropped"), "{}", stderr(&out));
}

#[test]
fn a_bad_endpoint_is_refused_with_what_to_write() {
    let ws = workspace("[telemetry]\notlp_endpoint = \"collector:4317\"\n");
    let out = call(ws.path(), "echo", r#"{"message": "hi"}"#);
    assert!(!out.status.success(), "{out:?}");
    assert!(stderr(&out).contains("[telemetry] otlp_endpoint") && stderr(&out).contains("http://"), "{}", stderr(&out));
}

/// The threads of process `pid` that are the OpenTelemetry SDK's batch exporter (its name,
/// `OpenTelemetry.Traces.BatchProcessor`, as the kernel keeps it: 15 bytes).
fn exporter_threads(pid: u32) -> usize {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .filter_map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).ok())
        .filter(|name| name.starts_with("OpenTelemetry"))
        .count()
}

#[test]
fn a_server_runs_an_exporter_only_when_configured_and_exports_its_calls() {
    let plain = HttpServer::start(TOOLGATE, &[]);
    assert_eq!(exporter_threads(plain.pid()), 0, "no [telemetry]: no exporter thread");
    drop(plain);

    let collector = Collector::start();
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(ws.path().join("toolgate.toml"), telemetry(collector.port)).unwrap();
    let server = HttpServer::start_in(TOOLGATE, ws, &[]);
    assert_eq!(exporter_threads(server.pid()), 1);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_call.py");
    let token = server.token.clone().unwrap();
    let out = Command::new(python::sdk_python())
        .arg(script)
        .args([&server.url, &token, "echo", r#"{"message": "zebra-marker-7731"}"#])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // The batch is sent every 5 s while the server runs.
    for _ in 0..300 {
        if !collector.received().is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let received = collector.received();
    let spans = spans(&received);
    let (call, stages) = call_and_stages(&spans);
    assert_eq!(text(&call.attributes, "tool").as_deref(), Some("echo"), "{call:#?}");
    assert_eq!(text(&call.attributes, "outcome").as_deref(), Some("ok"), "{call:#?}");
    assert!(stages.contains(&"execute".to_owned()) && stages.contains(&"audit".to_owned()), "{stages:?}");
    assert!(!received.iter().any(|r| r.body.windows(17).any(|w| w == b"zebra-marker-7731")));
}
