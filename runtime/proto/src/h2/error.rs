//! HTTP/2 error codes (RFC 9113 §7) and the scope of an error (§5.4).

use core::fmt;

use super::StreamId;

/// An error code as carried by RST_STREAM and GOAWAY (RFC 9113 §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ErrorCode {
    /// NO_ERROR (0x0): graceful shutdown, or no error.
    NoError = 0x0,
    /// PROTOCOL_ERROR (0x1): an unspecific protocol violation.
    ProtocolError = 0x1,
    /// INTERNAL_ERROR (0x2): an unexpected internal error.
    InternalError = 0x2,
    /// FLOW_CONTROL_ERROR (0x3): the peer violated flow control.
    FlowControlError = 0x3,
    /// SETTINGS_TIMEOUT (0x4): a SETTINGS frame was not acknowledged in time.
    SettingsTimeout = 0x4,
    /// STREAM_CLOSED (0x5): a frame arrived after the stream was half-closed.
    StreamClosed = 0x5,
    /// FRAME_SIZE_ERROR (0x6): a frame had an invalid size.
    FrameSizeError = 0x6,
    /// REFUSED_STREAM (0x7): the stream was refused before any processing.
    RefusedStream = 0x7,
    /// CANCEL (0x8): the stream is no longer needed.
    Cancel = 0x8,
    /// COMPRESSION_ERROR (0x9): the field compression context cannot be maintained.
    CompressionError = 0x9,
    /// CONNECT_ERROR (0xa): a CONNECT tunnel was reset or closed abnormally.
    ConnectError = 0xa,
    /// ENHANCE_YOUR_CALM (0xb): the peer is generating excessive load.
    EnhanceYourCalm = 0xb,
    /// INADEQUATE_SECURITY (0xc): the transport does not meet minimum security requirements.
    InadequateSecurity = 0xc,
    /// HTTP_1_1_REQUIRED (0xd): the peer should retry over HTTP/1.1.
    Http11Required = 0xd,
}

/// Every code, in wire order: the wire value is the position.
const ALL: [ErrorCode; 14] = [
    ErrorCode::NoError,
    ErrorCode::ProtocolError,
    ErrorCode::InternalError,
    ErrorCode::FlowControlError,
    ErrorCode::SettingsTimeout,
    ErrorCode::StreamClosed,
    ErrorCode::FrameSizeError,
    ErrorCode::RefusedStream,
    ErrorCode::Cancel,
    ErrorCode::CompressionError,
    ErrorCode::ConnectError,
    ErrorCode::EnhanceYourCalm,
    ErrorCode::InadequateSecurity,
    ErrorCode::Http11Required,
];

impl ErrorCode {
    /// The code for a wire value; `None` for codes RFC 9113 does not define, which must
    /// not trigger special behaviour (§7).
    pub fn from_u32(value: u32) -> Option<Self> {
        ALL.get(usize::try_from(value).ok()?).copied()
    }

    /// The RFC name, e.g. `PROTOCOL_ERROR`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::NoError => "NO_ERROR",
            ErrorCode::ProtocolError => "PROTOCOL_ERROR",
            ErrorCode::InternalError => "INTERNAL_ERROR",
            ErrorCode::FlowControlError => "FLOW_CONTROL_ERROR",
            ErrorCode::SettingsTimeout => "SETTINGS_TIMEOUT",
            ErrorCode::StreamClosed => "STREAM_CLOSED",
            ErrorCode::FrameSizeError => "FRAME_SIZE_ERROR",
            ErrorCode::RefusedStream => "REFUSED_STREAM",
            ErrorCode::Cancel => "CANCEL",
            ErrorCode::CompressionError => "COMPRESSION_ERROR",
            ErrorCode::ConnectError => "CONNECT_ERROR",
            ErrorCode::EnhanceYourCalm => "ENHANCE_YOUR_CALM",
            ErrorCode::InadequateSecurity => "INADEQUATE_SECURITY",
            ErrorCode::Http11Required => "HTTP_1_1_REQUIRED",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A protocol error with the scope RFC 9113 §5.4 assigns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum H2Error {
    /// Connection error (§5.4.1): send GOAWAY with this code, then close.
    Connection(ErrorCode),
    /// Stream error (§5.4.2): send RST_STREAM on this stream; the connection lives on.
    Stream(StreamId, ErrorCode),
}

impl H2Error {
    /// The error code, whatever the scope.
    pub fn code(self) -> ErrorCode {
        match self {
            H2Error::Connection(code) | H2Error::Stream(_, code) => code,
        }
    }
}

impl fmt::Display for H2Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            H2Error::Connection(code) => write!(f, "connection error {code}"),
            H2Error::Stream(id, code) => write!(f, "stream error {code} on stream {}", id.get()),
        }
    }
}

impl std::error::Error for H2Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_values_and_names_are_the_rfc_ones() {
        let expected = [
            (0x0, "NO_ERROR"),
            (0x1, "PROTOCOL_ERROR"),
            (0x2, "INTERNAL_ERROR"),
            (0x3, "FLOW_CONTROL_ERROR"),
            (0x4, "SETTINGS_TIMEOUT"),
            (0x5, "STREAM_CLOSED"),
            (0x6, "FRAME_SIZE_ERROR"),
            (0x7, "REFUSED_STREAM"),
            (0x8, "CANCEL"),
            (0x9, "COMPRESSION_ERROR"),
            (0xa, "CONNECT_ERROR"),
            (0xb, "ENHANCE_YOUR_CALM"),
            (0xc, "INADEQUATE_SECURITY"),
            (0xd, "HTTP_1_1_REQUIRED"),
        ];
        for (value, name) in expected {
            let code = ErrorCode::from_u32(value).unwrap();
            assert_eq!(code as u32, value);
            assert_eq!(code.name(), name);
            assert_eq!(code.to_string(), name);
        }
        assert_eq!(ErrorCode::from_u32(0xe), None);
        assert_eq!(ErrorCode::from_u32(u32::MAX), None);
    }

    #[test]
    fn scope_keeps_the_code() {
        let conn = H2Error::Connection(ErrorCode::FrameSizeError);
        let stream = H2Error::Stream(StreamId::new(3), ErrorCode::Cancel);
        assert_eq!(conn.code(), ErrorCode::FrameSizeError);
        assert_eq!(stream.code(), ErrorCode::Cancel);
        assert_eq!(conn.to_string(), "connection error FRAME_SIZE_ERROR");
        assert_eq!(stream.to_string(), "stream error CANCEL on stream 3");
    }
}
