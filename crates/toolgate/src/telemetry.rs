//! Traces over OTLP (`[telemetry]`, `docs/gateway.md` "Operations"): one `tool_call` span per
//! call with a child span per pipeline stage, sent to an OpenTelemetry collector over OTLP/HTTP
//! (protobuf) when an endpoint is configured, and nothing at all otherwise.
//!
//! The spans are `tracing` spans of target [`CALL_TARGET`] (made in [`CallSpan`]); a program
//! that wants them exported adds [`install`]'s layer to its subscriber, filtered to that
//! target. Without it the spans' callsites are disabled and cost a branch. A span carries tool
//! names, the policy's decision, the outcome (an error's kind), the caller's user and agent ids
//! and durations: never a parameter, an output or an error's text, which are hostile or secret.

use std::collections::BTreeMap;
use std::time::Duration;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator as _};
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracerProvider, Tracer};
use serde::{Deserialize, Serialize};
use toolgate_core::trace::TraceHeaders;
use toolgate_core::{ToolError, ToolOutput};
use tracing::Span;
use tracing::field::Empty;

/// The target of the call and stage spans: the one a subscriber's trace layer lets through.
pub const CALL_TARGET: &str = "toolgate::call";

/// How long one export may take, connecting included; a collector that is away costs the
/// exporter's thread this much per batch, never a call.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long stopping waits for the last spans to be sent.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(3);

/// The most of a collector's answer that is read (it is only checked for its status).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// `[telemetry]`: where traces go. Off unless `otlp_endpoint` (or the standard
/// `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The collector's OTLP/HTTP base URL (`http://collector:4318`); traces are posted to
    /// `/v1/traces` under it, as with `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub otlp_endpoint: Option<String>,
    /// Headers sent with every export (`Authorization = "Bearer ..."`); a token is better given
    /// in `OTEL_EXPORTER_OTLP_HEADERS` or `TOOLGATE__TELEMETRY__OTLP_HEADERS__AUTHORIZATION`.
    pub otlp_headers: BTreeMap<String, String>,
    /// The traces' `service.name` (default `toolgate`, or `OTEL_SERVICE_NAME`).
    pub service_name: Option<String>,
}

/// Where spans are sent, when they are.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Endpoint {
    /// `[telemetry] otlp_endpoint`, with the traces path: `http://collector:4318/v1/traces`.
    Configured(String),
    /// Only the standard variables name one: the exporter reads them itself.
    FromEnvironment,
}

/// The endpoint `config` and the environment (`env`) name, if any; an error says what is wrong
/// with a configured one.
fn endpoint(config: &TelemetryConfig, env: &dyn Fn(&str) -> Option<String>) -> Result<Option<Endpoint>, String> {
    let set = |name: &str| env(name).is_some_and(|v| !v.trim().is_empty());
    if env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    if let Some(base) = config.otlp_endpoint.as_deref().filter(|e| !e.trim().is_empty()) {
        let url = url::Url::parse(base.trim()).map_err(|e| {
            format!("[telemetry] otlp_endpoint is not a URL ({e}); write the collector's OTLP/HTTP address, such as \"http://collector:4318\"")
        })?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err("[telemetry] otlp_endpoint must be an http:// or https:// address with a host, such as \"http://collector:4318\" (OTLP over HTTP; gRPC is not supported)".to_owned());
        }
        return Ok(Some(Endpoint::Configured(format!("{}/v1/traces", base.trim().trim_end_matches('/')))));
    }
    if set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") || set("OTEL_EXPORTER_OTLP_ENDPOINT") {
        return Ok(Some(Endpoint::FromEnvironment));
    }
    Ok(None)
}

/// The span layer a subscriber adds (filtered to [`CALL_TARGET`]) to export the call spans.
pub type TraceLayer<S> = tracing_opentelemetry::OpenTelemetryLayer<S, Tracer>;

/// The running exporter: its thread sends batches of spans until [`Telemetry::shutdown`].
#[derive(Debug)]
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// Sends the spans not yet sent (waiting at most a few seconds) and stops the exporter.
    /// Blocks: call it off the async runtime's threads (`spawn_blocking`), whose runtime must
    /// still be running, since the export is made on it.
    pub fn shutdown(&self) {
        toolgate_core::trace::set_on(false, current_headers);
        if let Err(e) = self.provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT) {
            tracing::warn!("traces: stopping the OTLP exporter: {e}");
        }
    }
}

/// The exporter and the layer that feeds it, when `config` (or the standard `OTEL_*` variables)
/// names a collector; `None`, and no thread started, otherwise. Must run on a Tokio runtime:
/// exports are sent on it, with the workspace's HTTP client.
pub fn install<S>(config: &TelemetryConfig) -> Result<Option<(Telemetry, TraceLayer<S>)>, String>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    install_with_env(config, &|name| std::env::var(name).ok())
}

fn install_with_env<S>(
    config: &TelemetryConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(Telemetry, TraceLayer<S>)>, String>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let Some(endpoint) = endpoint(config, env)? else { return Ok(None) };
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|_| "traces: the OTLP exporter needs a Tokio runtime to send on".to_owned())?;
    // An https collector needs a TLS provider; whoever installed one first keeps theirs.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(EXPORT_TIMEOUT)
        .timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| format!("traces: cannot build the HTTP client: {e}"))?;
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_timeout(EXPORT_TIMEOUT)
        .with_http_client(OnRuntime { client, runtime });
    if let Endpoint::Configured(url) = &endpoint {
        exporter = exporter.with_endpoint(url.clone());
    }
    if !config.otlp_headers.is_empty() {
        exporter = exporter.with_headers(config.otlp_headers.clone().into_iter().collect());
    }
    let exporter = exporter.build().map_err(|e| format!("traces: cannot set up the OTLP exporter: {e}"))?;
    let service = config
        .service_name
        .clone()
        .or_else(|| env("OTEL_SERVICE_NAME").filter(|s| !s.trim().is_empty()))
        .unwrap_or_else(|| "toolgate".to_owned());
    let resource = opentelemetry_sdk::Resource::builder_empty()
        .with_service_name(service)
        .with_attribute(opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build();
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("toolgate"))
        // Thread ids and names say nothing about a call; code locations stay (file and line).
        .with_threads(false);
    // From now on transports read an incoming `traceparent` and tools send theirs.
    toolgate_core::trace::set_on(true, current_headers);
    Ok(Some((Telemetry { provider }, layer)))
}

/// The `traceparent` (and `tracestate`) of the span the running task is in: a tool's `execute`
/// stage, whose future runs inside it (`tracing-opentelemetry` makes an entered span the
/// current OpenTelemetry context). `None` outside any exported span.
fn current_headers() -> Option<TraceHeaders> {
    struct Headers(Option<String>, Option<String>);
    impl Injector for Headers {
        fn set(&mut self, key: &str, value: String) {
            match key {
                "traceparent" => self.0 = Some(value),
                "tracestate" => self.1 = Some(value),
                _ => {}
            }
        }
    }
    let cx = opentelemetry::Context::current();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut headers = Headers(None, None);
    TraceContextPropagator::new().inject_context(&cx, &mut headers);
    TraceHeaders::parse(&headers.0?, headers.1.as_deref())
}

/// The OpenTelemetry context of a remote parent (checked already by [`TraceHeaders::parse`],
/// and again by the propagator), if it names a valid span.
fn remote_context(parent: &TraceHeaders) -> Option<opentelemetry::Context> {
    struct Headers<'a>(&'a TraceHeaders);
    impl Extractor for Headers<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            match key {
                "traceparent" => Some(self.0.traceparent()),
                "tracestate" => self.0.tracestate(),
                _ => None,
            }
        }
        fn keys(&self) -> Vec<&str> {
            vec!["traceparent", "tracestate"]
        }
    }
    let cx = TraceContextPropagator::new().extract(&Headers(parent));
    cx.span().span_context().is_valid().then_some(cx)
}

/// The exporter's HTTP client: the workspace's `reqwest`, whose requests are run on the Tokio
/// runtime the exporter was installed from (the SDK's batch thread has none of its own).
#[derive(Debug)]
struct OnRuntime {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let request = reqwest::Request::try_from(request)?;
        let sent = self.runtime.spawn(async move {
            let mut answer = client.execute(request).await?;
            let mut body = Vec::new();
            while let Some(chunk) = answer.chunk().await? {
                if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                    break;
                }
                body.extend_from_slice(&chunk);
            }
            Ok::<_, reqwest::Error>((answer.status(), body))
        });
        let (status, body) = match sent.await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => {
                // The URL can carry credentials: the error is said without it.
                let e = e.without_url();
                tracing::warn!(
                    "traces: the OTLP collector could not be reached ({}); these spans are dropped",
                    chain(&e)
                );
                return Err(Box::new(e));
            }
            Err(e) => {
                tracing::warn!("traces: the export was not sent ({e}); these spans are dropped");
                return Err(Box::new(e));
            }
        };
        if !status.is_success() {
            tracing::warn!("traces: the OTLP collector answered {status}; these spans are dropped");
        }
        Ok(Response::builder().status(status.as_u16()).body(Bytes::from(body))?)
    }
}

/// An error with its causes, `: `-separated.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// A call's `tool_call` span and its current stage's child span. Both are disabled (and free)
/// unless a subscriber exports [`CALL_TARGET`].
#[derive(Debug)]
pub(crate) struct CallSpan {
    call: Span,
    stage: Span,
}

impl CallSpan {
    /// The span of a call by `user` and `agent` (ids from the configuration or the gateway's
    /// authentication, never the model's text): a child of `parent`, the remote context the
    /// request carried, when there is one (only while traces are exported), else of the span
    /// the caller runs in (a tool's `execute` stage), else a new trace.
    pub(crate) fn start(user: &str, agent: &str, parent: Option<&TraceHeaders>) -> Self {
        // The span takes its parent from the current OpenTelemetry context when it is made.
        let _remote = parent.and_then(remote_context).map(opentelemetry::Context::attach);
        let call = tracing::info_span!(
            target: CALL_TARGET,
            "tool_call",
            tool = Empty,
            decision = Empty,
            approval = Empty,
            outcome = Empty,
            user = user,
            agent = agent,
            duration_ms = Empty,
            otel.status_code = Empty,
        );
        Self { call, stage: Span::none() }
    }

    /// Ends the current stage's span and starts `name`'s (one of `pipeline/mod.rs`'s stages).
    pub(crate) fn stage(&mut self, name: &'static str) {
        self.stage = tracing::info_span!(target: CALL_TARGET, parent: &self.call, "stage", otel.name = name, stage = name, outcome = Empty);
    }

    /// The current stage's span (the execute stage runs in it, so that a call a tool makes
    /// through the gate is its child).
    pub(crate) fn current(&self) -> &Span {
        &self.stage
    }

    /// The tool the call resolved to: a registered tool's name (never the caller's text).
    pub(crate) fn tool(&self, name: &str) {
        self.call.record("tool", name);
    }

    /// What policy (or a hook, or the gateway's grants) decided: `allow`, `tool_default`,
    /// `ask` or `deny`.
    pub(crate) fn decision(&self, decision: &'static str) {
        self.call.record("decision", decision);
    }

    /// How approval went (`approval.rs`'s fixed words).
    pub(crate) fn approval(&self, how: &'static str) {
        self.call.record("approval", how.trim_start_matches("approval: "));
    }

    /// Marks the stage the call ended in with `result`'s outcome, and ends it.
    pub(crate) fn end_stages(&mut self, result: &Result<ToolOutput, ToolError>) {
        if let Err(e) = result {
            self.stage.record("outcome", e.kind());
        }
        self.stage = Span::none();
    }

    /// Ends the call's span with its outcome (`ok` or the error's kind) and how long it `took`.
    pub(crate) fn finish(&mut self, result: &Result<ToolOutput, ToolError>, took: Duration) {
        self.stage = Span::none();
        let outcome = result.as_ref().map_or_else(ToolError::kind, |_| "ok");
        self.call.record("outcome", outcome);
        self.call.record("otel.status_code", if result.is_ok() { "ok" } else { "error" });
        self.call.record("duration_ms", took.as_secs_f64() * 1000.0);
    }
}

/// A policy verdict's name on a span.
pub(crate) fn verdict_name(verdict: toolgate_policy::Verdict) -> &'static str {
    match verdict {
        toolgate_policy::Verdict::Allow => "allow",
        toolgate_policy::Verdict::ToolDefault => "tool_default",
        toolgate_policy::Verdict::Ask => "ask",
        toolgate_policy::Verdict::Deny => "deny",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[tokio::test]
    async fn nothing_is_installed_without_an_endpoint() {
        let installed = install_with_env::<tracing_subscriber::Registry>(&TelemetryConfig::default(), &env_of(&[]));
        assert!(installed.expect("no configuration is no error").is_none());
        // Other OTEL_* variables (a service name, headers) do not turn it on either.
        let env = env_of(&[("OTEL_SERVICE_NAME", "svc"), ("OTEL_EXPORTER_OTLP_HEADERS", "a=b")]);
        assert!(install_with_env::<tracing_subscriber::Registry>(&TelemetryConfig::default(), &env).unwrap().is_none());
    }

    #[test]
    fn the_endpoint_comes_from_the_config_or_the_standard_variables() {
        let config = TelemetryConfig { otlp_endpoint: Some("http://collector:4318/".into()), ..Default::default() };
        assert_eq!(
            endpoint(&config, &env_of(&[])).unwrap(),
            Some(Endpoint::Configured("http://collector:4318/v1/traces".into()))
        );
        let env = env_of(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]);
        assert_eq!(endpoint(&TelemetryConfig::default(), &env).unwrap(), Some(Endpoint::FromEnvironment));
        assert_eq!(
            endpoint(&TelemetryConfig::default(), &env_of(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])).unwrap(),
            None
        );
        let off = env_of(&[("OTEL_SDK_DISABLED", "true"), ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]);
        assert_eq!(endpoint(&config, &off).unwrap(), None);
    }

    #[test]
    fn a_bad_endpoint_is_a_clear_error() {
        for bad in ["collector:4318", "grpc://collector:4317", "not a url"] {
            let config = TelemetryConfig { otlp_endpoint: Some(bad.into()), ..Default::default() };
            let e = endpoint(&config, &|_: &str| None).unwrap_err();
            assert!(e.contains("[telemetry] otlp_endpoint") && e.contains("http://collector:4318"), "{bad}: {e}");
        }
    }

    #[tokio::test]
    async fn a_configured_endpoint_installs_an_exporter() {
        let config = TelemetryConfig { otlp_endpoint: Some("http://127.0.0.1:9".into()), ..Default::default() };
        let (telemetry, _layer) =
            install_with_env::<tracing_subscriber::Registry>(&config, &|_: &str| None).unwrap().expect("installed");
        tokio::task::spawn_blocking(move || telemetry.shutdown()).await.unwrap();
    }
}
