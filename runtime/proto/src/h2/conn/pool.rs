//! A connection's pool of request heads (DESIGN 4.3); the head itself is
//! [`crate::head::RequestHead`], shared with HTTP/3.

pub use crate::head::{MAX_POOLED, MAX_POOLED_ARENA, MAX_POOLED_FIELDS, RequestHead};

/// A connection's pool of heads. Only the connection rents and returns: a head is owned
/// by whoever holds it, so one a handler or an arriving body still uses cannot be here.
#[derive(Debug, Default)]
pub struct HeadPool {
    free: Vec<RequestHead>,
}

impl HeadPool {
    /// A clean head, reused when one is pooled.
    pub fn rent(&mut self) -> RequestHead {
        self.free.pop().unwrap_or_default()
    }

    /// Takes a head back, reset, unless the pool is full or the head grew too big.
    pub fn give_back(&mut self, mut head: RequestHead) {
        if self.free.len() >= MAX_POOLED || head.too_big_to_keep() {
            return;
        }
        head.reset();
        if self.free.capacity() == 0 {
            self.free.reserve_exact(MAX_POOLED);
        }
        self.free.push(head);
    }

    /// Heads waiting to be reused.
    pub fn len(&self) -> usize {
        self.free.len()
    }

    /// Whether none are waiting.
    pub fn is_empty(&self) -> bool {
        self.free.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::head::Pseudo;

    fn head_with(fields: usize, value_len: usize) -> RequestHead {
        let mut head = RequestHead::default();
        head.set_pseudo(Pseudo::Method, b"POST");
        head.set_pseudo(Pseudo::Authority, b"example.com");
        head.set_content_length(7);
        for _ in 0..fields {
            head.push_field(b"x", &vec![b'v'; value_len]);
        }
        head
    }

    #[test]
    fn a_returned_head_comes_back_clean() {
        let mut pool = HeadPool::default();
        let head = head_with(3, 10);
        let arena = head.arena.as_ptr();
        pool.give_back(head);
        let head = pool.rent();
        assert_eq!(head.arena.as_ptr(), arena, "the same allocation is reused");
        assert_eq!(head.method(), b"");
        assert_eq!(head.authority(), None);
        assert_eq!(head.content_length(), None);
        assert_eq!(head.fields().len(), 0);
    }

    #[test]
    fn keeps_at_most_32() {
        let mut pool = HeadPool::default();
        for _ in 0..MAX_POOLED + 5 {
            pool.give_back(head_with(1, 1));
        }
        assert_eq!(pool.len(), MAX_POOLED);
    }

    #[test]
    fn keeps_64_fields_but_not_65() {
        let mut pool = HeadPool::default();
        let mut head = RequestHead::default();
        head.fields.reserve_exact(MAX_POOLED_FIELDS);
        for _ in 0..MAX_POOLED_FIELDS {
            head.push_field(b"a", b"b");
        }
        pool.give_back(head);
        assert_eq!(pool.len(), 1);
        let mut head = pool.rent();
        for _ in 0..=MAX_POOLED_FIELDS {
            head.push_field(b"a", b"b");
        }
        pool.give_back(head);
        assert_eq!(pool.len(), 0);
    }

    #[test]
    fn keeps_a_4_kib_arena_but_not_a_bigger_one() {
        let mut pool = HeadPool::default();
        let mut head = RequestHead::default();
        head.arena.reserve_exact(MAX_POOLED_ARENA);
        head.push_field(&[b'n'; 10], &vec![b'v'; MAX_POOLED_ARENA - 10]);
        assert_eq!(head.arena.capacity(), MAX_POOLED_ARENA);
        pool.give_back(head);
        assert_eq!(pool.len(), 1);
        let mut head = pool.rent();
        head.push_field(b"n", &vec![b'v'; MAX_POOLED_ARENA]);
        pool.give_back(head);
        assert_eq!(pool.len(), 0);
    }
}
