//! The host-memory budget: what the host allocates on an instance's behalf outside
//! its linear memory — resources and what they own (fields, requests, responses,
//! bodies and their buffers, streams, pollables), copies of guest data — charged to
//! the instance's [`HostMemoryAccount`] and given back when freed.
//!
//! How it is counted: wedge's global allocator ([`HostAllocator`]) writes, in front
//! of every block, the tag of the account that was *current* on the thread when the
//! block was allocated (none, most of the time). A store makes its account current
//! for the length of each host call its guest makes (the store's call hook, see
//! `host::store`), and the host code that drives a store makes no account current
//! when a call parks (the fiber is suspended and the thread moves on to other
//! tasks). A freed block gives its bytes back to the account it was charged to,
//! whenever and wherever it is freed (a response chunk is freed by the protocol
//! engine, after the store may be gone); a block of an account that has since
//! closed gives back nothing.
//!
//! Why not wasmtime's knobs alone: a live-resource cap (`max_resources`), the
//! per-`fields` size limit and hostcall fuel bound each thing separately, but their
//! product (10,000 resources × 128 KiB) is gigabytes. Counting the bytes themselves
//! bounds what a guest holds however it combines them. The price is one tag (8
//! bytes, or the block's alignment) per allocation and a thread-local read per
//! allocation and free.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Accounts open at once: one per store. More stores than this (far more than an
/// instance pool holds) share slot 0, which is never held against anyone, rather
/// than fail.
const ACCOUNTS: usize = 1 << 16;
const UNCOUNTED: u32 = 0;
/// An account slot packs its generation (high bits) and its bytes (low bits).
const GENERATION_SHIFT: u32 = 40;
const BYTES: u64 = (1 << GENERATION_SHIFT) - 1;
const GENERATIONS: u64 = (1 << (64 - GENERATION_SHIFT)) - 1;

static SLOTS: [AtomicU64; ACCOUNTS] = [const { AtomicU64::new(0) }; ACCOUNTS];
static FREE_SLOTS: Mutex<FreeSlots> = Mutex::new(FreeSlots {
    never_used: UNCOUNTED as usize + 1,
    returned: Vec::new(),
});

struct FreeSlots {
    never_used: usize,
    returned: Vec<u32>,
}

thread_local! {
    /// The tag of the account charged for this thread's allocations (0: none).
    static CURRENT: Cell<u64> = const { Cell::new(0) };
}

/// A tag names a slot (index + 1, so that 0 is "no account") and its generation.
fn tag(index: u32, generation: u64) -> u64 {
    (u64::from(index) + 1) << 32 | generation
}

fn untag(tag: u64) -> (usize, u64) {
    ((tag >> 32) as usize - 1, tag & 0xffff_ffff)
}

/// Adds `delta` bytes to the account `tag` names, if it is still open.
fn charge(tag: u64, delta: i64) {
    let (index, generation) = untag(tag);
    let slot = &SLOTS[index];
    let _ = slot.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |packed| {
        if packed >> GENERATION_SHIFT != generation {
            return None;
        }
        let bytes = (packed & BYTES).saturating_add_signed(delta).min(BYTES);
        Some(generation << GENERATION_SHIFT | bytes)
    });
}

/// One store's account of the host memory held on its behalf.
pub struct HostMemoryAccount {
    tag: u64,
}

impl HostMemoryAccount {
    /// Opens an account (the uncounted one when every slot is in use).
    pub fn open() -> Self {
        let index = {
            let mut free = crate::sync::lock(&FREE_SLOTS);
            match free.returned.pop() {
                Some(index) => index,
                None if free.never_used < ACCOUNTS => {
                    free.never_used += 1;
                    (free.never_used - 1) as u32
                }
                None => UNCOUNTED,
            }
        };
        if index == UNCOUNTED {
            tracing::warn!("{ACCOUNTS} stores at once: host memory of the newest goes uncounted");
        }
        let generation = SLOTS[index as usize].load(Ordering::Relaxed) >> GENERATION_SHIFT;
        HostMemoryAccount {
            tag: tag(index, generation),
        }
    }

    /// Bytes charged to this account and not freed yet (0 for the uncounted one).
    pub fn bytes(&self) -> u64 {
        match untag(self.tag).0 as u32 {
            UNCOUNTED => 0,
            index => SLOTS[index as usize].load(Ordering::Relaxed) & BYTES,
        }
    }

    /// Charges this thread's allocations to this account until [`suspend`].
    pub fn make_current(&self) {
        CURRENT.with(|current| current.set(self.tag));
    }

    /// Whether this account is still the thread's current one: false once the
    /// thread was handed to other work (see [`suspend`]) since [`make_current`].
    pub fn is_current(&self) -> bool {
        CURRENT.with(Cell::get) == self.tag
    }
}

/// Charges this thread's allocations to no account: called when host code driving
/// a store is about to leave it (a call parked, a poll ends).
pub fn suspend() {
    CURRENT.with(|current| current.set(0));
}

/// Runs a future that drives a store, making no account current whenever a poll of
/// it returns: a host call that parked left its account current, and what the
/// thread does next is not the guest's.
pub async fn suspending<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| {
        let poll = future.as_mut().poll(cx);
        suspend();
        poll
    })
    .await
}

impl Drop for HostMemoryAccount {
    fn drop(&mut self) {
        if self.is_current() {
            suspend();
        }
        let (index, generation) = untag(self.tag);
        if index as u32 == UNCOUNTED {
            return;
        }
        // A new generation: blocks charged to this one give nothing back to the next.
        let next = (generation + 1) & GENERATIONS;
        SLOTS[index].store(next << GENERATION_SHIFT, Ordering::Relaxed);
        let mut free = crate::sync::lock(&FREE_SLOTS);
        free.returned.push(index as u32);
    }
}

/// An instance's host-memory budget: its account and its limit, checked when a
/// host call returns and at every epoch tick.
pub struct HostMemoryBudget {
    account: HostMemoryAccount,
    limit: u64,
    /// Resources (handles) the instance may hold: enforced by wasmtime's tables,
    /// kept here to name it when they are full.
    max_resources: u32,
    /// Host calls in progress (a host call may call back into wasm, which may call
    /// the host again, e.g. to grow its memory).
    host_calls: u32,
    pub(crate) exceeded: bool,
}

impl HostMemoryBudget {
    pub(crate) fn new(limit: u64, max_resources: u32) -> Self {
        HostMemoryBudget {
            account: HostMemoryAccount::open(),
            limit,
            max_resources,
            host_calls: 0,
            exceeded: false,
        }
    }

    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes the instance may still make the host hold before it passes its limit.
    pub(crate) fn room(&self) -> u64 {
        self.limit.saturating_sub(self.account.bytes())
    }

    /// Runs `f` with what it allocates charged to the instance, whichever account
    /// the thread had (none in a host call that parked and was resumed), and gives
    /// the thread its account back after: for what the host keeps for the instance
    /// once a call returns but was made elsewhere (by a connection's task).
    pub(crate) fn charged<T>(&self, f: impl FnOnce() -> T) -> T {
        let before = CURRENT.with(Cell::get);
        self.account.make_current();
        let made = f();
        CURRENT.with(|current| current.set(before));
        made
    }

    pub(crate) fn max_resources(&self) -> u32 {
        self.max_resources
    }

    /// The guest calls the host: true for the outermost call, whose allocations
    /// are charged to the instance from now on.
    pub(crate) fn calling_host(&mut self) -> bool {
        self.host_calls += 1;
        let outermost = self.host_calls == 1;
        if outermost {
            self.account.make_current();
        }
        outermost
    }

    /// The host call returns: for the outermost, whether it parked on the way (the
    /// thread was handed to other work, which made no account current).
    pub(crate) fn returning_from_host(&mut self) -> Option<bool> {
        self.host_calls = self.host_calls.saturating_sub(1);
        if self.host_calls > 0 {
            return None;
        }
        let parked = !self.account.is_current();
        suspend();
        Some(parked)
    }

    /// Whether a host call is in progress that parked on the way (see
    /// [`returning_from_host`](Self::returning_from_host)).
    pub(crate) fn in_parked_host_call(&self) -> bool {
        self.host_calls > 0 && !self.account.is_current()
    }

    /// Whether the instance holds more host memory than it may; remembered, so
    /// that the trap that follows is reported as this.
    pub(crate) fn over_budget(&mut self) -> bool {
        if self.account.bytes() > self.limit {
            self.exceeded = true;
        }
        self.exceeded
    }
}

/// The process's allocator: the system allocator, with each block tagged with the
/// account charged for it (see the module docs). Installed by the `wedge` binary.
pub struct HostAllocator;

/// Room in front of a block for its tag, keeping the block's alignment.
fn tag_room(layout: Layout) -> usize {
    layout.align().max(size_of::<u64>())
}

/// The layout of a block with its tag room in front.
fn tagged(layout: Layout) -> Option<(Layout, usize)> {
    let room = tag_room(layout);
    let size = layout.size().checked_add(room)?;
    let layout = Layout::from_size_align(size, layout.align().max(align_of::<u64>())).ok()?;
    Some((layout, room))
}

/// Writes the current tag in front of the block at `base` and charges for it.
///
/// # Safety
/// `base` is a live block of `room + size` bytes, aligned to at least 8.
unsafe fn finish_alloc(base: *mut u8, room: usize, size: usize) -> *mut u8 {
    let tag = CURRENT.with(Cell::get);
    // SAFETY: `room` ≥ 8 lies inside the block and keeps the tag 8-aligned.
    let block = unsafe { base.add(room) };
    unsafe { block.cast::<u64>().sub(1).write(tag) };
    if tag != 0 {
        charge(tag, (room + size) as i64);
    }
    block
}

/// The tag in front of a block this allocator made.
///
/// # Safety
/// `block` was returned by [`HostAllocator`].
unsafe fn read_tag(block: *mut u8) -> u64 {
    unsafe { block.cast::<u64>().sub(1).read() }
}

// SAFETY: every block is a system block with the tag room in front; the layouts
// handed to `System` are the ones it allocated with.
unsafe impl GlobalAlloc for HostAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some((outer, room)) = tagged(layout) else {
            return std::ptr::null_mut();
        };
        let base = unsafe { System.alloc(outer) };
        if base.is_null() {
            return base;
        }
        unsafe { finish_alloc(base, room, layout.size()) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let Some((outer, room)) = tagged(layout) else {
            return std::ptr::null_mut();
        };
        let base = unsafe { System.alloc_zeroed(outer) };
        if base.is_null() {
            return base;
        }
        unsafe { finish_alloc(base, room, layout.size()) }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        let room = tag_room(layout);
        let tag = unsafe { read_tag(block) };
        if tag != 0 {
            charge(tag, -((room + layout.size()) as i64));
        }
        let outer = unsafe {
            Layout::from_size_align_unchecked(
                layout.size() + room,
                layout.align().max(align_of::<u64>()),
            )
        };
        unsafe { System.dealloc(block.sub(room), outer) }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let room = tag_room(layout);
        let Some(new_outer_size) = new_size.checked_add(room) else {
            return std::ptr::null_mut();
        };
        let tag = unsafe { read_tag(block) };
        let outer = unsafe {
            Layout::from_size_align_unchecked(
                layout.size() + room,
                layout.align().max(align_of::<u64>()),
            )
        };
        let base = unsafe { System.realloc(block.sub(room), outer, new_outer_size) };
        if base.is_null() {
            return base;
        }
        // The tag moved with the block; the block keeps its account.
        if tag != 0 {
            charge(tag, new_size as i64 - layout.size() as i64);
        }
        unsafe { base.add(room) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The allocator's own entry points, called directly (the test binary keeps
    /// the system allocator as its global one).
    fn alloc(size: usize, align: usize) -> (*mut u8, Layout) {
        let layout = Layout::from_size_align(size, align).unwrap();
        (unsafe { HostAllocator.alloc(layout) }, layout)
    }

    #[test]
    fn a_block_is_charged_to_the_current_account_and_given_back_when_freed() {
        let account = HostMemoryAccount::open();
        account.make_current();
        let (block, layout) = alloc(1000, 8);
        suspend();
        assert_eq!(account.bytes(), 1008);
        let (other, other_layout) = alloc(500, 8);
        assert_eq!(account.bytes(), 1008, "no account was current");
        unsafe { HostAllocator.dealloc(block, layout) };
        unsafe { HostAllocator.dealloc(other, other_layout) };
        assert_eq!(account.bytes(), 0);
    }

    #[test]
    fn a_block_freed_after_its_account_closed_gives_nothing_to_the_next_one() {
        let first = HostMemoryAccount::open();
        first.make_current();
        let (block, layout) = alloc(4096, 64);
        suspend();
        drop(first);
        // The slot is reused, in a new generation.
        let second = HostMemoryAccount::open();
        second.make_current();
        let (kept, kept_layout) = alloc(100, 8);
        suspend();
        unsafe { HostAllocator.dealloc(block, layout) };
        assert_eq!(second.bytes(), 108);
        unsafe { HostAllocator.dealloc(kept, kept_layout) };
        assert_eq!(second.bytes(), 0);
    }

    #[test]
    fn a_grown_block_keeps_its_account_and_alignment() {
        let account = HostMemoryAccount::open();
        account.make_current();
        let (block, layout) = alloc(64, 32);
        suspend();
        unsafe { block.write_bytes(7, 64) };
        let grown = unsafe { HostAllocator.realloc(block, layout, 10_000) };
        assert_eq!(grown as usize % 32, 0);
        assert_eq!(unsafe { grown.add(63).read() }, 7);
        assert_eq!(account.bytes(), 32 + 10_000);
        let grown_layout = Layout::from_size_align(10_000, 32).unwrap();
        unsafe { HostAllocator.dealloc(grown, grown_layout) };
        assert_eq!(account.bytes(), 0);
    }

    #[test]
    fn closing_the_current_account_leaves_none_current() {
        let account = HostMemoryAccount::open();
        account.make_current();
        drop(account);
        assert_eq!(CURRENT.with(Cell::get), 0);
    }
}
