//! The store's own thread: a current-thread tokio runtime that owns the pool and runs the work
//! the synchronous trait methods send it (why: the crate's docs, "Synchronous calls").

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;

use deadpool_postgres::{Object, Pool};
use tokio::sync::mpsc;

use crate::error::PgError;

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;
type Job = Box<dyn FnOnce(Pool) -> Task + Send>;

/// Sends work to the store's thread; dropping it ends the thread once the work sent is done.
#[derive(Debug)]
pub(crate) struct Bridge {
    jobs: Option<mpsc::UnboundedSender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Bridge {
    /// Starts the thread with its runtime and `pool`.
    pub(crate) fn start(pool: Pool) -> std::io::Result<Bridge> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (jobs, mut received) = mpsc::unbounded_channel::<Job>();
        let thread = std::thread::Builder::new().name("toolgate-postgres".into()).spawn(move || {
            runtime.block_on(async move {
                // Each job is its own task, so a slow query does not hold up the others.
                while let Some(job) = received.recv().await {
                    tokio::spawn(job(pool.clone()));
                }
            });
            // Every handle is gone: tasks still running lose their caller; the runtime drops
            // them (their connections return to a pool that is dropped with it).
        })?;
        Ok(Bridge { jobs: Some(jobs), thread: Some(thread) })
    }

    /// Starts `task` on the store's thread and returns at once: work that lasts as long as the
    /// store (a `LISTEN` connection), ended with the thread.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) -> Result<(), PgError> {
        let job: Job = Box::new(move |_pool: Pool| Box::pin(task));
        let jobs = self.jobs.as_ref().ok_or(PgError::Stopped)?;
        jobs.send(job).map_err(|_| PgError::Stopped)
    }

    /// Runs `work` with a pooled connection on the store's thread and waits for its result.
    /// Safe to call from any thread, inside a runtime or not (it never blocks on a future
    /// itself, only on a std channel).
    pub(crate) fn run<T, W, F>(&self, work: W) -> Result<T, PgError>
    where
        T: Send + 'static,
        W: FnOnce(Object) -> F + Send + 'static,
        F: Future<Output = Result<T, PgError>> + Send + 'static,
    {
        let (done, answer) = std_mpsc::sync_channel(1);
        let job: Job = Box::new(move |pool: Pool| {
            Box::pin(async move {
                let result = match pool.get().await {
                    Ok(client) => work(client).await,
                    Err(e) => Err(PgError::Pool(e)),
                };
                // The caller waits on the other end; it is gone only if its thread died.
                let _ = done.send(result);
            })
        });
        let jobs = self.jobs.as_ref().ok_or(PgError::Stopped)?;
        jobs.send(job).map_err(|_| PgError::Stopped)?;
        answer.recv().map_err(|_| PgError::Stopped)?
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(thread) = self.thread.take() {
            // Not from the store's own thread (no job holds a handle), so this cannot wait on
            // itself.
            let _ = thread.join();
        }
    }
}
