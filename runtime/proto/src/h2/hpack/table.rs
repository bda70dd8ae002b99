//! The static table (RFC 7541 Appendix A) and the dynamic table (§2.3.2, §4).

use std::collections::VecDeque;

/// RFC 7541 Appendix A; HPACK index i is entry i-1.
pub(super) const STATIC_TABLE: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// The first dynamic table index; lower ones are static (§2.3.3).
pub(super) const FIRST_DYNAMIC: usize = STATIC_TABLE.len() + 1;

/// The size an entry counts for: its octets plus 32 for bookkeeping (§4.1).
pub(crate) fn entry_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + 32
}

/// The static index of `(name, value)` and whether the value matched too; a full match wins
/// over a name match.
pub(super) fn static_find(name: &[u8], value: &[u8]) -> Option<(usize, bool)> {
    let mut by_name = None;
    for (i, &(n, v)) in STATIC_TABLE.iter().enumerate() {
        if n == name {
            if v == value {
                return Some((i + 1, true));
            }
            by_name.get_or_insert(i + 1);
        }
    }
    by_name.map(|i| (i, false))
}

/// Where an entry's octets are in [`DynamicTable::octets`].
#[derive(Clone, Copy)]
struct Entry {
    start: usize,
    name_len: usize,
    value_len: usize,
}

/// The dynamic table: a FIFO of fields bounded by a size (§4).
///
/// Names and values live in one octet buffer, oldest first, so an entry costs no allocation
/// of its own. Eviction only forgets the oldest entries; their octets are reclaimed by
/// moving the live ones to the front once the buffer would pass twice the table size, which
/// moves each octet at most once per table size inserted. Both buffers are reserved in full
/// the first time they are needed, so a warm table never allocates.
pub(crate) struct DynamicTable {
    octets: Vec<u8>,
    /// Oldest at the front.
    entries: VecDeque<Entry>,
    size: usize,
    max_size: usize,
}

impl DynamicTable {
    pub(crate) fn new(max_size: usize) -> Self {
        DynamicTable {
            octets: Vec::new(),
            entries: VecDeque::new(),
            size: 0,
            max_size,
        }
    }

    /// Entries in the table.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The sum of the entries' sizes (§4.1).
    #[cfg(test)]
    pub(super) fn size(&self) -> usize {
        self.size
    }

    /// The most `size` may reach.
    pub(crate) fn max_size(&self) -> usize {
        self.max_size
    }

    /// Entry `i`, newest first (0 is the most recently inserted).
    pub(crate) fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let e = self.entries.get(self.entries.len().checked_sub(i + 1)?)?;
        let name_end = e.start + e.name_len;
        Some((
            &self.octets[e.start..name_end],
            &self.octets[name_end..name_end + e.value_len],
        ))
    }

    /// The field at HPACK `index` in the combined address space: 1..=61 static, then this
    /// table newest first (§2.3.3).
    pub(super) fn field(&self, index: usize) -> Option<(&[u8], &[u8])> {
        match index.checked_sub(FIRST_DYNAMIC) {
            Some(i) => self.get(i),
            None => STATIC_TABLE.get(index.checked_sub(1)?).copied(),
        }
    }

    /// The newest entry index holding `(name, value)`, and whether the value matched too.
    pub(super) fn find(&self, name: &[u8], value: &[u8]) -> Option<(usize, bool)> {
        let mut by_name = None;
        for i in 0..self.len() {
            let (n, v) = self.get(i)?;
            if n == name {
                if v == value {
                    return Some((i, true));
                }
                by_name.get_or_insert(i);
            }
        }
        by_name.map(|i| (i, false))
    }

    /// Changes the maximum size, evicting as needed (§4.3).
    pub(crate) fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        self.evict_to(max_size);
    }

    /// Inserts a field, evicting the oldest entries to make room; a field larger than the
    /// table empties it (§4.4). The slices must not point into this table.
    pub(crate) fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = entry_size(name, value);
        if size > self.max_size {
            self.clear();
            return;
        }
        self.evict_to(self.max_size - size);
        self.make_room(name.len() + value.len());
        self.entries.push_back(Entry {
            start: self.octets.len(),
            name_len: name.len(),
            value_len: value.len(),
        });
        self.octets.extend_from_slice(name);
        self.octets.extend_from_slice(value);
        self.size += size;
    }

    /// Evicts every entry.
    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.octets.clear();
        self.size = 0;
    }

    fn evict_to(&mut self, target: usize) {
        while self.size > target {
            let Some(e) = self.entries.pop_front() else {
                break;
            };
            self.size -= e.name_len + e.value_len + 32;
        }
        if self.entries.is_empty() {
            self.octets.clear();
        }
    }

    /// Ensures `n` more octets fit within the buffer's bound, reclaiming evicted octets.
    fn make_room(&mut self, n: usize) {
        let bound = 2 * self.max_size;
        if self.octets.len() + n > bound {
            let dead = self.entries.front().map_or(self.octets.len(), |e| e.start);
            self.octets.copy_within(dead.., 0);
            self.octets.truncate(self.octets.len() - dead);
            for e in &mut self.entries {
                e.start -= dead;
            }
        }
        if self.octets.capacity() < bound {
            self.octets.reserve_exact(bound - self.octets.len());
        }
        let max_entries = self.max_size / 32;
        if self.entries.capacity() < max_entries {
            self.entries.reserve_exact(max_entries - self.entries.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_table_is_appendix_a() {
        assert_eq!(STATIC_TABLE.len(), 61);
        let t = DynamicTable::new(0);
        assert_eq!(t.field(1), Some((&b":authority"[..], &b""[..])));
        assert_eq!(t.field(2), Some((&b":method"[..], &b"GET"[..])));
        assert_eq!(t.field(8), Some((&b":status"[..], &b"200"[..])));
        assert_eq!(t.field(14), Some((&b":status"[..], &b"500"[..])));
        assert_eq!(
            t.field(16),
            Some((&b"accept-encoding"[..], &b"gzip, deflate"[..]))
        );
        assert_eq!(t.field(24), Some((&b"cache-control"[..], &b""[..])));
        assert_eq!(t.field(33), Some((&b"date"[..], &b""[..])));
        assert_eq!(t.field(55), Some((&b"set-cookie"[..], &b""[..])));
        assert_eq!(t.field(61), Some((&b"www-authenticate"[..], &b""[..])));
        assert_eq!(t.field(0), None);
        assert_eq!(t.field(62), None);
        // Only entries 2..=14 and 16 have values.
        for (i, (_, v)) in STATIC_TABLE.iter().enumerate() {
            assert_eq!(
                v.is_empty(),
                !(1..=13).contains(&i) && i != 15,
                "index {}",
                i + 1
            );
        }
    }

    #[test]
    fn static_find_prefers_a_full_match() {
        assert_eq!(static_find(b":status", b"200"), Some((8, true)));
        assert_eq!(static_find(b":status", b"404"), Some((13, true)));
        assert_eq!(static_find(b":status", b"201"), Some((8, false)));
        assert_eq!(
            static_find(b"content-type", b"text/plain"),
            Some((31, false))
        );
        assert_eq!(static_find(b"x-custom", b""), None);
        assert_eq!(static_find(b":path", b"/index.html"), Some((5, true)));
    }

    #[test]
    fn sizes_count_32_octets_of_overhead() {
        let mut t = DynamicTable::new(4096);
        t.insert(b"custom-key", b"custom-header");
        assert_eq!((t.len(), t.size()), (1, 55));
        assert_eq!(
            t.field(62),
            Some((&b"custom-key"[..], &b"custom-header"[..]))
        );
        assert_eq!(t.field(63), None);
    }

    #[test]
    fn newest_first_and_eviction_oldest_first() {
        let mut t = DynamicTable::new(3 * 34);
        t.insert(b"a", b"1");
        t.insert(b"b", b"2");
        t.insert(b"c", b"3");
        assert_eq!((t.len(), t.size()), (3, 102));
        assert_eq!(t.get(0), Some((&b"c"[..], &b"3"[..])));
        assert_eq!(t.get(2), Some((&b"a"[..], &b"1"[..])));
        t.insert(b"d", b"4");
        assert_eq!((t.len(), t.size()), (3, 102));
        assert_eq!(t.get(0), Some((&b"d"[..], &b"4"[..])));
        assert_eq!(t.get(2), Some((&b"b"[..], &b"2"[..])));
        assert_eq!(t.get(3), None);
    }

    #[test]
    fn an_entry_larger_than_the_table_empties_it() {
        let mut t = DynamicTable::new(40);
        t.insert(b"a", b"1");
        t.insert(b"name", b"value"); // 41 > 40
        assert_eq!((t.len(), t.size()), (0, 0));
        t.insert(b"name", b"valu"); // exactly 40
        assert_eq!((t.len(), t.size()), (1, 40));
    }

    #[test]
    fn shrinking_evicts_and_zero_disables() {
        let mut t = DynamicTable::new(4096);
        t.insert(b"a", b"1");
        t.insert(b"bb", b"22");
        t.set_max_size(36);
        assert_eq!((t.len(), t.size()), (1, 36));
        assert_eq!(t.get(0), Some((&b"bb"[..], &b"22"[..])));
        t.set_max_size(0);
        assert_eq!((t.len(), t.size()), (0, 0));
        t.insert(b"a", b"1");
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn find_prefers_a_full_match_then_the_newest_name() {
        let mut t = DynamicTable::new(4096);
        t.insert(b"x", b"1");
        t.insert(b"x", b"2");
        t.insert(b"y", b"3");
        assert_eq!(t.find(b"x", b"1"), Some((2, true)));
        assert_eq!(t.find(b"x", b"9"), Some((1, false)));
        assert_eq!(t.find(b"z", b"3"), None);
    }

    #[test]
    fn octets_are_reclaimed_and_stay_within_twice_the_table() {
        let mut t = DynamicTable::new(256);
        let mut expected = VecDeque::new();
        for i in 0..10_000usize {
            let name = format!("n{}", i % 7);
            let value = "v".repeat(i % 90);
            t.insert(name.as_bytes(), value.as_bytes());
            expected.push_front((name, value));
            let mut size: usize = expected.iter().map(|(n, v)| n.len() + v.len() + 32).sum();
            while size > 256 {
                let (n, v) = expected.pop_back().unwrap();
                size -= n.len() + v.len() + 32;
            }
            assert_eq!((t.len(), t.size()), (expected.len(), size));
            for (j, (n, v)) in expected.iter().enumerate() {
                assert_eq!(
                    t.get(j),
                    Some((n.as_bytes(), v.as_bytes())),
                    "step {i} entry {j}"
                );
            }
            assert!(t.octets.len() <= 512);
        }
        assert_eq!(t.octets.capacity(), 512);
    }

    #[test]
    fn a_warm_table_does_not_reallocate() {
        let mut t = DynamicTable::new(4096);
        t.insert(b"warm", b"up");
        let (octets, entries) = (t.octets.as_ptr(), t.entries.capacity());
        for i in 0..5_000usize {
            t.insert(format!("name-{i}").as_bytes(), &vec![b'x'; i % 300]);
        }
        assert_eq!(t.octets.as_ptr(), octets);
        assert_eq!(t.entries.capacity(), entries);
    }
}
