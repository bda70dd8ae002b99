//! Who commits a file's writes: a file's one commit task, in groups of the writes
//! that came in a turn of the event loop or while it committed (`os`), or the
//! writer thread (`disk`), and the threads of a file.

use std::cell::Cell;
use std::sync::{Arc, Mutex, mpsc};

use rusqlite::Connection;

use super::super::backend::{Failure, Outcome};
use super::sync::sync_now;
use super::transaction::{Job, Totals, answer, batch, commit, small_enough_for_async_thread};
use super::wal::{WAL_FRAMES, WalSize, batch_wal_limit, wal_full};
use super::{File, storage};

/// A thread of the file, stopped and joined when this is dropped: its channel's
/// sender goes first, which tells it to finish.
pub(super) struct Stopper<T> {
    sender: Option<mpsc::Sender<T>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl<T> Stopper<T> {
    pub(super) fn spawn(
        name: &str,
        body: impl FnOnce(mpsc::Receiver<T>) + Send + 'static,
    ) -> Result<Stopper<T>, String>
    where
        T: Send + 'static,
    {
        let (sender, receiver) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(receiver))
            .map_err(|err| format!("cannot start a thread: {err}"))?;
        Ok(Stopper {
            sender: Some(sender),
            thread: Some(thread),
        })
    }

    pub(super) fn send(&self, item: T) -> Outcome<()> {
        self.sender
            .as_ref()
            .and_then(|sender| sender.send(item).ok())
            .ok_or_else(|| Failure::Backend("the writer thread has stopped".into()))
    }
}

/// Closes the file's threads before the file: the writer finishes the batch it
/// holds, the syncer syncs once more.
impl<T> Drop for Stopper<T> {
    fn drop(&mut self) {
        drop(self.sender.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The writes of an `os` file waiting for their group's commit.
#[derive(Default)]
pub(super) struct Group {
    /// `None`: no commit is scheduled or running; the next write schedules one.
    /// `Some`: the writes the scheduled or running commit takes next.
    waiting: Mutex<Option<Vec<Job>>>,
}

impl Group {
    /// Puts `job` into the next commit of `file`: the one scheduled or running (it
    /// takes the writes that came meanwhile once it is done with its own), or one
    /// scheduled now on this async thread ([`commit_group`]).
    pub(super) fn join(self: &Arc<Group>, file: &Arc<File>, job: Job) {
        let mut waiting = crate::sync::lock(&self.waiting);
        if let Some(jobs) = waiting.as_mut() {
            jobs.push(job);
            return;
        }
        *waiting = Some(vec![job]);
        drop(waiting);
        let scheduled = Scheduled(Some(self.clone()));
        tokio::spawn(commit_group(file.clone(), scheduled));
    }
}

/// A file's scheduled or running commit: one at a time, so writes that come while
/// a transaction is committed (on a blocking thread, or by another worker) wait
/// for the next one instead of each taking a thread of their own to wait for the
/// connection. Dropped before it was done (its runtime ending), it drops the
/// writes still waiting, which fails them, and the next write schedules a commit
/// again.
struct Scheduled(Option<Arc<Group>>);

impl Scheduled {
    /// The writes that came since the last call; none once there are none left, and
    /// then the next write schedules a new commit.
    fn next_writes(&mut self) -> Vec<Job> {
        let Some(group) = &self.0 else {
            return Vec::new();
        };
        let mut waiting = crate::sync::lock(&group.waiting);
        let jobs = waiting.as_mut().map(std::mem::take).unwrap_or_default();
        if jobs.is_empty() {
            *waiting = None;
            drop(waiting);
            self.0 = None;
        }
        jobs
    }
}

impl Drop for Scheduled {
    fn drop(&mut self) {
        if let Some(group) = self.0.take() {
            let dropped = crate::sync::lock(&group.waiting).take();
            drop(dropped);
        }
    }
}

/// Commits a file's writes in groups: once the tasks ready now have run, and those
/// the next poll of the event loop wakes, every write they made is taken into one
/// transaction (up to [`MAX_BATCH`] writes or [`MAX_BATCH_BYTES`] each, so one
/// commit adds a bounded amount to the WAL), committed on this async thread if it
/// is small ([`MAX_ASYNC_THREAD_BYTES`]), else on a blocking thread; then the
/// writes that came meanwhile, until none are left. Each write is answered once
/// its transaction is committed, or failed with it. A group refused while the WAL
/// is past the writes' [`batch_wal_limit`] is refused whole, checked under the
/// connection so that commits never pass it together.
async fn commit_group(file: Arc<File>, mut scheduled: Scheduled) {
    loop {
        // `yield_now` defers this task past the event loop's next poll: a task
        // spawned from a task (as this one) may run next, before the other ready
        // tasks (tokio's multi-thread scheduler keeps it in its LIFO slot), which
        // made groups of one. Before each later round too: writes from other
        // workers may keep coming, and this thread's other tasks must not wait for
        // a run of commits. (A round holds at most the app's `max_in_flight`
        // writes: one transaction unless it carries megabytes, and those are
        // committed on a blocking thread.)
        tokio::task::yield_now().await;
        let taken = scheduled.next_writes();
        if taken.is_empty() {
            return;
        }
        let mut jobs = taken.into_iter();
        while let Some(first) = jobs.next() {
            let (writes, answers) = batch(first, || jobs.next());
            let limit = batch_wal_limit(&writes);
            let on_async_thread = small_enough_for_async_thread(&writes);
            let apply = move |file: &File, conn: &Connection| {
                if file.wal.over(limit) {
                    return Ok(Err(wal_full(limit)));
                }
                let outcomes = commit(conn, &file.totals, &writes)?;
                file.wal.set_frames(WAL_FRAMES.with(Cell::get));
                Ok(Ok(outcomes))
            };
            let committed = if on_async_thread {
                file.on_conn(apply).await
            } else {
                file.on_blocking_thread(apply).await
            };
            // Refused or failed, every write of the transaction gets that failure.
            answer(answers, committed.flatten());
        }
    }
}

/// What a write fails with when it was dropped uncommitted: its writer thread
/// stopped, or its group's commit ended with its runtime.
pub(super) fn not_committed() -> Failure {
    Failure::Backend("the write was dropped before its commit (the store is closing)".into())
}

/// The writer thread of a `disk` file: every write queued when it is free goes into
/// one transaction (up to [`MAX_BATCH`] writes or [`MAX_BATCH_BYTES`]), committed
/// before any of them is answered; a sync once the WAL holds half of
/// [`batch_wal_limit`], so it never holds more than that and one batch. Ends when the
/// backend is dropped.
pub(super) fn write_loop(
    conn: &Connection,
    totals: &Mutex<Option<Totals>>,
    wal: &WalSize,
    jobs: mpsc::Receiver<Job>,
) {
    while let Ok(first) = jobs.recv() {
        let (writes, answers) = batch(first, || jobs.try_recv().ok());
        answer(answers, commit(conn, totals, &writes).map_err(storage));
        wal.set_frames(WAL_FRAMES.with(Cell::get));
        let limit = batch_wal_limit(&writes);
        if wal.bytes() > limit / 2 && sync_now(conn) {
            wal.set_frames(0);
        }
    }
}
