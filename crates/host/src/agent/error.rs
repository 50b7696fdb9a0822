//! The host agent's errors: the agents' one error type (`colosched_sys::agent_error`), so the
//! node agent's command line reports them as its own.

pub use colosched_sys::agent_error::{AgentError as Error, Result};
