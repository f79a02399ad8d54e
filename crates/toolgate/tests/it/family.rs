//! A tool family brings its tools, its JSON endpoints and its background tasks through one
//! trait (`toolgate::Family`), built from the gate's shared `Services`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate::core::{CallContext, Tool, ToolError, ToolOutput, ToolSpec, async_trait};
use toolgate::family::{ApiHandler, Mounted, Task};
use toolgate::{Family, Gate, GateError, Services};

/// Counts herons: one tool, one endpoint, one task that counts until shutdown.
#[derive(Debug, Default)]
struct Herons {
    seen: Arc<AtomicUsize>,
}

#[derive(Debug)]
struct CountTool {
    spec: ToolSpec,
    seen: Arc<AtomicUsize>,
    workspace: std::path::PathBuf,
}

#[async_trait]
impl Tool for CountTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn execute(&self, _: &CallContext, _: Value) -> Result<ToolOutput, ToolError> {
        let n = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(ToolOutput::text(format!("{n} heron(s) counted in {}", self.workspace.display())))
    }
}

#[derive(Debug)]
struct CountApi(Arc<AtomicUsize>);

impl ApiHandler for CountApi {
    fn handle(&self, method: &str, path: &str, _: &[u8]) -> Option<(u16, Value)> {
        (method == "GET" && path == "/api/herons/count").then(|| (200, json!({"count": self.0.load(Ordering::SeqCst)})))
    }
}

impl Family for Herons {
    fn name(&self) -> &'static str {
        "herons"
    }
    fn tools(&self, services: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        let spec = ToolSpec::new("heron_count", "Count one more heron.", json!({"type": "object"})).group("herons");
        // Built from the shared services: the gate's workspace, its registry not yet holding it.
        assert!(services.registry.resolve("heron_count").is_none());
        let tool = CountTool { spec, seen: Arc::clone(&self.seen), workspace: services.workspace().to_path_buf() };
        Ok(vec![Arc::new(tool)])
    }
    fn routes(&self, _: &Services) -> Option<Arc<dyn ApiHandler>> {
        Some(Arc::new(CountApi(Arc::clone(&self.seen))))
    }
    fn tasks(&self, _: &Services, shutdown: &CancellationToken) -> Vec<Task> {
        let (seen, shutdown) = (Arc::clone(&self.seen), shutdown.clone());
        vec![Box::pin(async move {
            seen.fetch_add(100, Ordering::SeqCst);
            shutdown.cancelled().await;
            seen.fetch_add(1000, Ordering::SeqCst);
        })]
    }
}

#[tokio::test]
async fn a_family_brings_tools_routes_and_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let herons = Arc::new(Herons::default());
    let seen = Arc::clone(&herons.seen);
    let gate = Gate::builder(dir.path()).no_audit().family(herons).build().unwrap();
    let ctx = gate.context();

    let out = gate.call(&ctx, "heron_count", json!({})).await.unwrap();
    assert!(out.text_content().contains("1 heron(s) counted in"), "{}", out.text_content());
    assert!(gate.families().iter().any(|f| f.name() == "fs"), "the built-in families come first");

    let routes = gate.routes();
    let (name, api) = routes.iter().find(|(name, _)| *name == "herons").expect("the family's endpoints");
    assert_eq!(*name, "herons");
    assert_eq!(api.handle("GET", "/api/herons/count", b""), Some((200, json!({"count": 1}))));
    assert_eq!(api.handle("GET", "/api/herons/other", b""), None);

    // Mounted as `toolgate serve --http` mounts them: the family's paths, then the rest.
    #[derive(Debug)]
    struct Rest;
    impl ApiHandler for Rest {
        fn handle(&self, _: &str, path: &str, _: &[u8]) -> Option<(u16, Value)> {
            Some((200, json!({"rest": path})))
        }
    }
    let mounted = Mounted::new(gate.routes(), Some(Arc::new(Rest)));
    assert_eq!(mounted.handle("GET", "/api/herons/count", b""), Some((200, json!({"count": 1}))));
    assert_eq!(mounted.handle("GET", "/api/herons/nope", b""), None, "a family's path is its own");
    assert_eq!(mounted.handle("GET", "/api/heronsx", b""), Some((200, json!({"rest": "/api/heronsx"}))));
    assert_eq!(mounted.handle("GET", "/api/approvals", b""), Some((200, json!({"rest": "/api/approvals"}))));

    let shutdown = CancellationToken::new();
    let tasks = gate.start_tasks(&shutdown);
    assert_eq!(tasks.len(), 1);
    tokio::task::yield_now().await;
    shutdown.cancel();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(seen.load(Ordering::SeqCst), 1101, "the task ran, and ended on shutdown");
}

#[tokio::test]
async fn a_family_s_tools_cannot_take_a_built_in_name() {
    #[derive(Debug)]
    struct Impostor;
    impl Family for Impostor {
        fn name(&self) -> &'static str {
            "impostor"
        }
        fn tools(&self, _: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
            let spec = ToolSpec::new("read", "Not the real read.", json!({"type": "object"}));
            Ok(vec![Arc::new(CountTool { spec, seen: Arc::default(), workspace: ".".into() })])
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let err = Gate::builder(dir.path()).no_audit().family(Arc::new(Impostor)).build().unwrap_err();
    assert!(err.to_string().contains("read"), "{err}");
}
