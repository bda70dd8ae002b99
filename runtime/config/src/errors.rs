//! What is wrong with a `wedge.toml`: every problem found, each with its line
//! and key path, so one run shows the operator all of them.

use std::fmt;

/// One problem in the config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// 1-based line of the offending key or value; `None` for the file as a whole.
    pub line: Option<usize>,
    /// Where in the document, e.g. `app[1].limits.memory`; empty for syntax errors.
    pub key: String,
    /// One line saying what is wrong.
    pub message: String,
}

/// Every problem found in one config file; displays one per line as
/// `file:line: key: message`, in line order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    file: String,
    errors: Vec<ConfigError>,
}

impl ConfigErrors {
    pub(super) fn new(file: String, mut errors: Vec<ConfigError>) -> Self {
        // Stable: problems on one line keep the order they were found in.
        errors.sort_by_key(|error| error.line);
        ConfigErrors { file, errors }
    }

    /// The file as named in the messages.
    pub fn file(&self) -> &str {
        &self.file
    }

    pub fn errors(&self) -> &[ConfigError] {
        &self.errors
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, error) in self.errors.iter().enumerate() {
            if n > 0 {
                f.write_str("\n")?;
            }
            f.write_str(&self.file)?;
            if let Some(line) = error.line {
                write!(f, ":{line}")?;
            }
            if !error.key.is_empty() {
                write!(f, ": {}", error.key)?;
            }
            write!(f, ": {}", error.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}
