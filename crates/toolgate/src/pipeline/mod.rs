//! The call pipeline, one module per stage, in the order [`crate::Gate::call`] runs them:
//!
//! ```text
//! resolve -> policy -> validate -> rate + limits -> approval -> hooks(pre) -> execute -> output
//!   -> hooks(post) -> audit
//! ```

pub(crate) mod approval;
pub(crate) mod audit;
pub mod cache;
pub(crate) mod execute;
pub(crate) mod hooks;
pub(crate) mod limits;
pub mod loop_breaker;
pub(crate) mod output;
pub(crate) mod policy;
pub(crate) mod rate;
pub(crate) mod resolve;
pub(crate) mod skill_scope;
pub(crate) mod validate;
