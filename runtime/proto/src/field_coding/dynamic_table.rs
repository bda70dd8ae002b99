//! The dynamic table's entries (RFC 7541 §2.3.2, §4; RFC 9204 §3.2): a FIFO of fields
//! bounded by the sum of their sizes. HPACK addresses it newest first after its static
//! table; QPACK by absolute index.

use std::collections::VecDeque;

/// The size an entry counts for: its octets plus 32 for bookkeeping (§4.1).
pub(crate) fn entry_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + 32
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
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The sum of the entries' sizes (§4.1).
    #[cfg(test)]
    pub(crate) fn size(&self) -> usize {
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

    /// The newest entry index holding `(name, value)`, and whether the value matched too.
    pub(crate) fn find(&self, name: &[u8], value: &[u8]) -> Option<(usize, bool)> {
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
    pub(crate) fn clear(&mut self) {
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
    fn sizes_count_32_octets_of_overhead() {
        let mut t = DynamicTable::new(4096);
        t.insert(b"custom-key", b"custom-header");
        assert_eq!((t.len(), t.size()), (1, 55));
        assert_eq!(t.get(0), Some((&b"custom-key"[..], &b"custom-header"[..])));
        assert_eq!(t.get(1), None);
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
