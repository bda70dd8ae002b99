//! HTTP/3 error codes (RFC 9114 §8.1, RFC 9204 §6) and the scope of an error.

use core::fmt;

/// An application error code carried by CONNECTION_CLOSE, RESET_STREAM and STOP_SENDING.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u64)]
pub enum ErrorCode {
    /// H3_NO_ERROR: no error; closing the connection or stream is not an error.
    NoError = 0x100,
    /// H3_GENERAL_PROTOCOL_ERROR: a violation with no more specific code.
    GeneralProtocolError = 0x101,
    /// H3_INTERNAL_ERROR: an internal error in the HTTP stack.
    InternalError = 0x102,
    /// H3_STREAM_CREATION_ERROR: the peer created a stream it must not.
    StreamCreationError = 0x103,
    /// H3_CLOSED_CRITICAL_STREAM: a stream the connection needs was closed or reset.
    ClosedCriticalStream = 0x104,
    /// H3_FRAME_UNEXPECTED: a frame not permitted in the current state or on this stream.
    FrameUnexpected = 0x105,
    /// H3_FRAME_ERROR: a frame whose layout or size is invalid.
    FrameError = 0x106,
    /// H3_EXCESSIVE_LOAD: the peer generates load we refuse to carry.
    ExcessiveLoad = 0x107,
    /// H3_ID_ERROR: a stream or push id used incorrectly.
    IdError = 0x108,
    /// H3_SETTINGS_ERROR: an error in a SETTINGS frame's payload.
    SettingsError = 0x109,
    /// H3_MISSING_SETTINGS: the control stream did not start with SETTINGS.
    MissingSettings = 0x10a,
    /// H3_REQUEST_REJECTED: the request was not processed; it may be retried.
    RequestRejected = 0x10b,
    /// H3_REQUEST_CANCELLED: the request or its response is cancelled.
    RequestCancelled = 0x10c,
    /// H3_REQUEST_INCOMPLETE: the stream ended before the request was complete.
    RequestIncomplete = 0x10d,
    /// H3_MESSAGE_ERROR: the message was malformed.
    MessageError = 0x10e,
    /// H3_CONNECT_ERROR: a CONNECT tunnel was reset or closed abnormally.
    ConnectError = 0x10f,
    /// H3_VERSION_FALLBACK: retry the request over HTTP/1.1.
    VersionFallback = 0x110,
    /// QPACK_DECOMPRESSION_FAILED: an encoded field section could not be decoded.
    QpackDecompressionFailed = 0x200,
    /// QPACK_ENCODER_STREAM_ERROR: an encoder stream instruction could not be applied.
    QpackEncoderStreamError = 0x201,
    /// QPACK_DECODER_STREAM_ERROR: a decoder stream instruction could not be applied.
    QpackDecoderStreamError = 0x202,
}

/// Every code with its RFC name.
const ALL: [(ErrorCode, &str); 20] = [
    (ErrorCode::NoError, "H3_NO_ERROR"),
    (ErrorCode::GeneralProtocolError, "H3_GENERAL_PROTOCOL_ERROR"),
    (ErrorCode::InternalError, "H3_INTERNAL_ERROR"),
    (ErrorCode::StreamCreationError, "H3_STREAM_CREATION_ERROR"),
    (ErrorCode::ClosedCriticalStream, "H3_CLOSED_CRITICAL_STREAM"),
    (ErrorCode::FrameUnexpected, "H3_FRAME_UNEXPECTED"),
    (ErrorCode::FrameError, "H3_FRAME_ERROR"),
    (ErrorCode::ExcessiveLoad, "H3_EXCESSIVE_LOAD"),
    (ErrorCode::IdError, "H3_ID_ERROR"),
    (ErrorCode::SettingsError, "H3_SETTINGS_ERROR"),
    (ErrorCode::MissingSettings, "H3_MISSING_SETTINGS"),
    (ErrorCode::RequestRejected, "H3_REQUEST_REJECTED"),
    (ErrorCode::RequestCancelled, "H3_REQUEST_CANCELLED"),
    (ErrorCode::RequestIncomplete, "H3_REQUEST_INCOMPLETE"),
    (ErrorCode::MessageError, "H3_MESSAGE_ERROR"),
    (ErrorCode::ConnectError, "H3_CONNECT_ERROR"),
    (ErrorCode::VersionFallback, "H3_VERSION_FALLBACK"),
    (
        ErrorCode::QpackDecompressionFailed,
        "QPACK_DECOMPRESSION_FAILED",
    ),
    (
        ErrorCode::QpackEncoderStreamError,
        "QPACK_ENCODER_STREAM_ERROR",
    ),
    (
        ErrorCode::QpackDecoderStreamError,
        "QPACK_DECODER_STREAM_ERROR",
    ),
];

impl ErrorCode {
    /// The code for a wire value; `None` for others, which (reserved 0x1f*N+0x21 ones
    /// included) mean nothing special to us (§8.1).
    pub fn from_u64(value: u64) -> Option<Self> {
        ALL.iter()
            .map(|&(code, _)| code)
            .find(|&code| code as u64 == value)
    }

    /// The RFC name, e.g. `H3_FRAME_UNEXPECTED`.
    pub fn name(self) -> &'static str {
        ALL.iter()
            .find(|&&(code, _)| code == self)
            .map_or("", |&(_, name)| name)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A protocol error with its scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum H3Error {
    /// Close the whole connection (CONNECTION_CLOSE with this code).
    Connection(ErrorCode),
    /// Abort only the stream it happened on (STOP_SENDING and RESET_STREAM with this code).
    Stream(ErrorCode),
}

impl H3Error {
    /// The error code, whatever the scope.
    pub fn code(self) -> ErrorCode {
        match self {
            H3Error::Connection(code) | H3Error::Stream(code) => code,
        }
    }
}

impl fmt::Display for H3Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            H3Error::Connection(code) => write!(f, "connection error {code}"),
            H3Error::Stream(code) => write!(f, "stream error {code}"),
        }
    }
}

impl std::error::Error for H3Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_values_and_names_are_the_rfc_ones() {
        // RFC 9114 §8.1 runs 0x100..=0x110 in this order; RFC 9204 §6 adds 0x200..=0x202.
        let values = (0x100..=0x110).chain(0x200..=0x202);
        for (value, (code, name)) in values.zip(ALL) {
            assert_eq!(code as u64, value, "{name}");
            assert_eq!(ErrorCode::from_u64(value), Some(code));
            assert_eq!(code.to_string(), name);
        }
        assert_eq!(ErrorCode::NoError.name(), "H3_NO_ERROR");
        assert_eq!(ErrorCode::MessageError as u64, 0x10e);
        assert_eq!(ErrorCode::from_u64(0x111), None);
        assert_eq!(
            ErrorCode::from_u64(0x21),
            None,
            "reserved codes are not ours"
        );
    }

    #[test]
    fn scope_keeps_the_code() {
        let conn = H3Error::Connection(ErrorCode::FrameError);
        let stream = H3Error::Stream(ErrorCode::MessageError);
        assert_eq!(conn.code(), ErrorCode::FrameError);
        assert_eq!(stream.code(), ErrorCode::MessageError);
        assert_eq!(conn.to_string(), "connection error H3_FRAME_ERROR");
        assert_eq!(stream.to_string(), "stream error H3_MESSAGE_ERROR");
    }
}
