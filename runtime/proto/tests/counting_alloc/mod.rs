//! A global allocator that counts allocations on the current thread, for the tests
//! that prove a warm connection allocates nothing per request.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations (and reallocations) made on this thread so far.
pub fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

/// Each test binary that counts also checks the counter counts, so a zero it
/// reports means no allocation, not no allocator.
#[test]
fn the_counter_sees_allocations() {
    let before = allocations();
    let v: Vec<u8> = Vec::with_capacity(std::hint::black_box(64));
    std::hint::black_box(&v);
    assert!(
        allocations() > before,
        "the counting allocator is not installed"
    );
}
