//! What the fuzz targets share: the record framing that turns one fuzz input into a
//! sequence of operations (`examples/fuzz_seeds.rs` in wedge-proto writes it).

/// Splits fuzz input into records `[tag, len, payload of len octets]`; the last payload
/// may be cut short. A target reads the tag as the operation and the payload as its input.
pub fn records(mut data: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    std::iter::from_fn(move || {
        let [tag, len, rest @ ..] = data else {
            return None;
        };
        let (payload, next) = rest.split_at(usize::from(*len).min(rest.len()));
        data = next;
        Some((*tag, payload))
    })
}
