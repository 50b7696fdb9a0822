//! The agent's errors: the agents' one error type (`colosched_sys::agent_error`), shared with the
//! host agent (`colosched-agent host`), by what the caller does about them: a config the agent
//! cannot use is a usage error (exit 2); a state file it cannot write stops it changing anything;
//! a system file it cannot read fails the cycle (the daemon logs it, rate-limited, and goes on).

pub use colosched_sys::agent_error::{AgentError as Error, Result};
