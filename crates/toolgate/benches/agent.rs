//! `cargo xtask bench agent`: the agent runtime's own overhead per model turn and per tool call.
//!
//! The model is an in-process scripted `ModelClient` that answers at once (so what is timed is
//! the runtime: building the request, the session writes to SQLite, the loop's checks, and the
//! tool call through the real gate with its audit log), and then the same script over loopback
//! HTTP (the OpenAI client, JSON both ways). The peer in the same run is a direct `gate.call`
//! of the same tool: the per-call overhead is the difference.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolgate::Gate;
use toolgate::agent::{
    AgentConfig, AgentError, Message, ModelClient, ModelReply, ModelRequest, ProviderConfig, RunSpec, ToolCall,
};
use toolgate::config::Config;

/// Calls `echo` until the conversation holds `calls` results, then answers.
#[derive(Debug)]
struct Script {
    calls: usize,
}

#[async_trait::async_trait]
impl ModelClient for Script {
    async fn complete(&self, req: &ModelRequest) -> Result<ModelReply, AgentError> {
        let done = req.messages.iter().filter(|m| matches!(m, Message::Tool { .. })).count();
        if done < self.calls {
            let call = ToolCall {
                id: format!("c{done}"),
                name: "echo".into(),
                arguments: format!("{{\"message\":\"m{done}\"}}"),
            };
            Ok(ModelReply { tool_calls: vec![call], ..ModelReply::default() })
        } else {
            Ok(ModelReply { content: Some("done".into()), ..ModelReply::default() })
        }
    }
}

fn gate(dir: &std::path::Path, calls: usize) -> Arc<Gate> {
    let mut config = Config::default();
    config.rate_limits.enabled = false;
    config
        .providers
        .insert("script".into(), ProviderConfig { base_url: "http://127.0.0.1:9/v1".into(), ..Default::default() });
    let mut agent = AgentConfig { provider: "script".into(), model: "m".into(), ..Default::default() };
    agent.max_iterations = 1000;
    config.agents.insert("bench".into(), agent);
    let gate = Arc::new(Gate::builder(dir).config(config).build().expect("gate"));
    gate.bind_agents();
    if let Some(rt) = gate.agents() {
        rt.set_client("script", Arc::new(Script { calls }));
    }
    gate
}

fn per(total: Duration, n: usize) -> f64 {
    total.as_secs_f64() * 1e6 / n as f64
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        // Peer: the tool call alone, through the same gate.
        let g = gate(dir.path(), 0);
        let ctx = g.context();
        let n = 2000;
        for i in 0..100 {
            let _ = g.call(&ctx, "echo", json!({"message": format!("w{i}")})).await;
        }
        let t = Instant::now();
        for i in 0..n {
            let _ = g.call(&ctx, "echo", json!({"message": format!("m{i}")})).await;
        }
        let direct = per(t.elapsed(), n);
        println!("direct gate.call(echo):                 {direct:8.1} µs per call");

        // One turn, no tool: session create, two messages, one model turn, finish.
        let runs = 300;
        let t = Instant::now();
        for _ in 0..runs {
            let _ = g.agents().expect("agents").run(RunSpec::new("bench", "go"), &ctx).await;
        }
        let one_turn = per(t.elapsed(), runs);
        println!("agent run, 1 turn, no tool call:        {one_turn:8.1} µs per run");

        // 20 tool calls: 21 turns per run.
        let dir2 = tempfile::tempdir().expect("tempdir");
        let g20 = gate(dir2.path(), 20);
        let runs = 30;
        let t = Instant::now();
        for _ in 0..runs {
            let _ = g20.agents().expect("agents").run(RunSpec::new("bench", "go"), &g20.context()).await;
        }
        let run20 = per(t.elapsed(), runs);
        let per_turn = run20 / 21.0;
        let overhead = (run20 - 20.0 * direct) / 21.0;
        println!("agent run, 20 tool calls (21 turns):    {run20:8.1} µs per run");
        println!("  per turn with its tool call:          {per_turn:8.1} µs");
        println!("  runtime overhead per turn (minus the direct call): {overhead:8.1} µs  (target < 1000 µs)");
        println!("  ratio per tool call, agent loop / direct gate.call: {:.2}x", per_turn / direct);
    });
}
