//! Traces over OTLP (issue 29 item 6, `docs/gateway.md` "Traces"), through the binary: a
//! `toolgate call` configured with `[telemetry] otlp_endpoint` sends its `tool_call` span and
//! one child per pipeline stage to the collector, with the tool and the decision and never a
//! parameter's value; a collector that is not there costs the call nothing but a log line.
//!
//! A `toolgate serve` starts the exporter's thread only when configured, and exports the calls
//! real MCP clients make; a caller's W3C `traceparent` (a header, or `_meta` per SEP-414) is
//! continued, a malformed one ignored, and a call run on a paired node (`nodes run`) joins the
//! calling node's trace.
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
use crate::support::toolgate_with_input;

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

/// A caller's trace context (header): trace `0af7...319c`, parent span `b7ad...3331`.
const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
/// Another, sent in `_meta` (SEP-414).
const META_PARENT: &str = "00-1bf7651916cd43dd8448eb211c80319d-c7ad6b7169203332-01";
/// A malformed one: a zero trace id.
const BAD_PARENT: &str = "00-00000000000000000000000000000000-b7ad6b7169203331-01";

/// One `tools/call` over Streamable HTTP by rmcp's client, with `headers` on every request and
/// `traceparent` in the call's `_meta` when `meta` names one.
fn call_with(
    url: &str,
    token: &str,
    tool: &str,
    arguments: serde_json::Value,
    headers: &[(&'static str, &str)],
    meta: Option<&str>,
) {
    use rmcp::ServiceExt as _;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let headers: std::collections::HashMap<_, _> = headers
        .iter()
        .map(|(k, v)| (reqwest::header::HeaderName::from_static(k), reqwest::header::HeaderValue::from_str(v).unwrap()))
        .collect();
    let config =
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(token.to_owned()).custom_headers(headers);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.expect("MCP handshake");
        let mut params = rmcp::model::CallToolRequestParams::new(tool.to_owned())
            .with_arguments(arguments.as_object().unwrap().clone());
        if let Some(traceparent) = meta {
            let mut object = rmcp::model::RequestMetaObject::default();
            object.set_traceparent(traceparent);
            params.meta = Some(object);
        }
        let result = client.call_tool(params).await.expect("tools/call");
        assert_ne!(result.is_error, Some(true), "{result:?}");
        let _ = client.cancel().await;
    });
}

/// The id as OTLP carries it (bytes) from its hex.
fn id(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
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
    // A caller inside a trace: its `traceparent` header, then one in `_meta`; then a malformed
    // header, on another tool so that its span is told apart.
    let echo = serde_json::json!({"message": "traced"});
    call_with(&server.url, &token, "echo", echo.clone(), &[("traceparent", PARENT), ("tracestate", "caller=1")], None);
    call_with(&server.url, &token, "echo", echo.clone(), &[], Some(META_PARENT));
    call_with(
        &server.url,
        &token,
        "read",
        serde_json::json!({"path": "hello.txt"}),
        &[("traceparent", BAD_PARENT)],
        None,
    );
    // Node A (a one-off `toolgate call`, exporting to the same collector as `toolgate-a`) runs
    // echo on this server through `nodes run`.
    let a = tempfile::tempdir().unwrap();
    let a_config = telemetry(collector.port).replace("toolgate-test", "toolgate-a");
    std::fs::write(a.path().join("toolgate.toml"), a_config).unwrap();
    let (ok, out) = toolgate_with_input(a.path(), &["nodes", "add", "b", &server.url], &format!("{token}\n"));
    assert!(ok, "{out}");
    let run = r#"{"action": "run", "node": "b", "tool": "echo", "arguments": {"message": "via A"}}"#;
    let out = call(a.path(), "nodes", run);
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("via A"), "{out:?}");

    // The server sends its batch every 5 s: wait for its five calls (A's came at its exit).
    let calls = |spans: &[(String, Span)]| spans.iter().filter(|(_, s)| s.name == "tool_call").count();
    for _ in 0..300 {
        if calls(&spans(&collector.received())) >= 6 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let received = collector.received();
    let spans = spans(&received);
    let on_server: Vec<(String, Span)> = spans.iter().filter(|(svc, _)| svc == "toolgate-test").cloned().collect();
    let on_a: Vec<&Span> = spans.iter().filter(|(svc, _)| svc == "toolgate-a").map(|(_, s)| s).collect();
    let server_calls: Vec<&Span> = on_server.iter().map(|(_, s)| s).filter(|s| s.name == "tool_call").collect();
    assert_eq!(server_calls.len(), 5, "{spans:#?}");

    // The Python SDK's call sent no trace context: a root, with its stages.
    let a_trace = on_a.iter().find(|s| s.name == "tool_call").map(|s| s.trace_id.clone()).unwrap_or_default();
    let roots: Vec<&&Span> = server_calls
        .iter()
        .filter(|s| s.parent_span_id.is_empty() && text(&s.attributes, "tool").as_deref() == Some("echo"))
        .collect();
    assert_eq!(roots.len(), 1, "{server_calls:#?}");
    assert_ne!(roots[0].trace_id, a_trace);
    let plain: Vec<(String, Span)> =
        on_server.iter().filter(|(_, s)| s.trace_id == roots[0].trace_id).cloned().collect();
    let (call0, stages) = call_and_stages(&plain);
    assert_eq!(text(&call0.attributes, "tool").as_deref(), Some("echo"), "{call0:#?}");
    assert_eq!(text(&call0.attributes, "outcome").as_deref(), Some("ok"), "{call0:#?}");
    assert!(stages.contains(&"execute".to_owned()) && stages.contains(&"audit".to_owned()), "{stages:?}");
    assert!(!received.iter().any(|r| r.body.windows(17).any(|w| w == b"zebra-marker-7731")));

    // The header's and `_meta`'s contexts are continued: same trace, the caller's span as parent.
    for (parent, state) in [(PARENT, "caller=1"), (META_PARENT, "")] {
        let (trace, span) = (id(&parent[3..35]), id(&parent[36..52]));
        let traced: Vec<&&Span> = server_calls.iter().filter(|s| s.trace_id == trace).collect();
        assert_eq!(traced.len(), 1, "{parent}: {server_calls:#?}");
        assert_eq!(traced[0].parent_span_id, span, "{parent}: {:#?}", traced[0]);
        assert_eq!(traced[0].trace_state, state, "{:#?}", traced[0]);
        assert_eq!(text(&traced[0].attributes, "tool").as_deref(), Some("echo"));
        let stages = on_server.iter().filter(|(_, s)| s.parent_span_id == traced[0].span_id).count();
        assert!(stages >= 10, "its stages are its children: {stages}");
    }
    // The malformed one is ignored: the call is a trace of its own.
    let read: Vec<&&Span> =
        server_calls.iter().filter(|s| text(&s.attributes, "tool").as_deref() == Some("read")).collect();
    assert_eq!(read.len(), 1, "{server_calls:#?}");
    assert!(read[0].parent_span_id.is_empty(), "{:#?}", read[0]);
    assert_eq!(read[0].trace_id.len(), 16);
    assert!(read[0].trace_id.iter().any(|&b| b != 0) && read[0].trace_id != id(&PARENT[3..35]), "{:#?}", read[0]);

    // `nodes run`: A's call is a root; the server's echo joins its trace, under A's execute stage.
    let a_call = on_a.iter().find(|s| s.name == "tool_call").expect("A exported its call");
    assert_eq!(text(&a_call.attributes, "tool").as_deref(), Some("nodes"), "{a_call:#?}");
    assert!(a_call.parent_span_id.is_empty(), "{a_call:#?}");
    let a_execute = on_a.iter().find(|s| s.name == "execute" && s.parent_span_id == a_call.span_id).unwrap();
    let joined: Vec<&&Span> = server_calls.iter().filter(|s| s.trace_id == a_call.trace_id).collect();
    assert_eq!(joined.len(), 1, "the forwarded call shares A's trace: {server_calls:#?}");
    assert_eq!(joined[0].parent_span_id, a_execute.span_id, "{:#?}", joined[0]);
}
