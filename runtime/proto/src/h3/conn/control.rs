//! The client's control stream (RFC 9114 §6.2.1): SETTINGS first, then GOAWAY,
//! MAX_PUSH_ID and CANCEL_PUSH; unknown frames are skipped.

use super::{Connection, Event};
use crate::h3::error::{ErrorCode, H3Error};
use crate::h3::frame::{Frame, FrameReader, FrameType, Item, Setting};

/// The largest control frame we buffer; SETTINGS with every known setting and plenty of
/// grease fits in a fraction of it.
const MAX_CONTROL_FRAME: u64 = 4 * 1024;

/// The client's control stream.
#[derive(Debug)]
pub(super) struct ControlStream {
    pub(super) id: u64,
    reader: FrameReader,
    settings_seen: bool,
}

impl ControlStream {
    pub(super) fn new(id: u64) -> Self {
        ControlStream {
            id,
            reader: FrameReader::default(),
            settings_seen: false,
        }
    }
}

const fn conn(code: ErrorCode) -> H3Error {
    H3Error::Connection(code)
}

impl Connection {
    pub(super) fn recv_control(
        &mut self,
        input: &[u8],
        events: &mut Vec<Event>,
    ) -> Result<(), H3Error> {
        let Some(control) = self.control.as_mut() else {
            return Ok(());
        };
        let mut pos = 0;
        while let Some(item) = control.reader.next(input, &mut pos)? {
            match item {
                Item::Head(head) => {
                    if !control.settings_seen && head.ty != FrameType::Settings {
                        return Err(conn(ErrorCode::MissingSettings));
                    }
                    match head.ty {
                        FrameType::Settings if control.settings_seen => {
                            return Err(conn(ErrorCode::FrameUnexpected));
                        }
                        FrameType::Data
                        | FrameType::Headers
                        | FrameType::PushPromise
                        | FrameType::Http2Only(_) => {
                            return Err(conn(ErrorCode::FrameUnexpected));
                        }
                        // Skipped (§9), but not for free: a flood of them moves nothing.
                        FrameType::Unknown(_) if !self.empty_frames.spend() => {
                            return Err(conn(ErrorCode::ExcessiveLoad));
                        }
                        FrameType::Unknown(_) => {}
                        _ if head.len > MAX_CONTROL_FRAME => {
                            return Err(conn(ErrorCode::ExcessiveLoad));
                        }
                        _ => {}
                    }
                }
                // Only the field section limit concerns us: our encoder uses no dynamic
                // table, so the client's QPACK settings change nothing.
                Item::Frame(Frame::Settings(settings)) => {
                    control.settings_seen = true;
                    for setting in settings.iter() {
                        if let Setting::MaxFieldSectionSize(size) = setting {
                            self.peer_max_field_section_size = size;
                        }
                    }
                }
                Item::Frame(Frame::Goaway(id)) => {
                    // A client's GOAWAY carries a push id, never increasing (§5.2).
                    if self.peer_goaway.is_some_and(|prev| id > prev) {
                        return Err(conn(ErrorCode::IdError));
                    }
                    self.peer_goaway = Some(id);
                    events.push(Event::PeerGoaway { id });
                }
                Item::Frame(Frame::MaxPushId(id)) => {
                    // It may not shrink (§7.2.7); we never push, so it changes nothing else.
                    if self.max_push_id.is_some_and(|prev| id < prev) {
                        return Err(conn(ErrorCode::IdError));
                    }
                    self.max_push_id = Some(id);
                }
                // A client may cancel only a push some PUSH_PROMISE announced (§7.2.3);
                // we never push, so every CANCEL_PUSH names an id never mentioned.
                Item::Frame(Frame::CancelPush(_)) => return Err(conn(ErrorCode::IdError)),
                // DATA and the other types were refused at their head.
                Item::Data(_) | Item::Frame(_) => {}
            }
        }
        Ok(())
    }
}
