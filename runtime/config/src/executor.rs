//! How an app's requests run: as calls of a wasi:http handler (a component, or a
//! module made one), or as WAGI programs, CGI over WASI preview 1's stdio.

use std::fmt;

/// `executor` of an `[[app]]` (and of a guest crate's `[package.metadata.wedge]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Executor {
    /// `wasi-http`: a component exporting `wasi:http/incoming-handler` (or
    /// `wasi:http/handler`), called once per request. The default.
    #[default]
    WasiHttp,
    /// `wagi`: a WASI preview 1 command module (or a `wasi:cli/command` component)
    /// run once per request, the request as CGI variables and stdin, the response
    /// what it writes to stdout (RFC 3875).
    Wagi,
}

impl Executor {
    pub fn as_str(self) -> &'static str {
        match self {
            Executor::WasiHttp => "wasi-http",
            Executor::Wagi => "wagi",
        }
    }

    pub fn parse(text: &str) -> Result<Executor, String> {
        [Executor::WasiHttp, Executor::Wagi]
            .into_iter()
            .find(|executor| executor.as_str() == text)
            .ok_or_else(|| format!("`{text}` is not an executor: `wasi-http` or `wagi`"))
    }
}

impl fmt::Display for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
