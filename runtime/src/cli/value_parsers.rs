//! Value parsers for flags that several argument groups share: a flag group
//! imports these rather than another group's module, so groups never import
//! each other.

use std::time::Duration;

use crate::host::limits::parse_size;

/// A duration above zero, for limits and timeouts where zero would fail everything
/// at once (every request out of CPU time, every connection timed out) rather than
/// mean "off". As a `std` or a `humantime` duration, whichever the flag's field is.
pub(super) fn parse_positive_duration<D: From<Duration>>(text: &str) -> Result<D, String> {
    match humantime::parse_duration(text) {
        Ok(duration) if duration.is_zero() => Err("must be more than zero".into()),
        Ok(duration) => Ok(duration.into()),
        Err(err) => Err(err.to_string()),
    }
}

pub(super) fn parse_positive_size(text: &str) -> Result<u64, String> {
    match parse_size(text)? {
        0 => Err("must be more than zero".into()),
        size => Ok(size),
    }
}
