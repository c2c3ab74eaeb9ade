//! Shared ownership of the components of a decode tree.
//!
//! A tree's services (target memory, instruction decoder, element router,
//! error logger) are used by every decoder in it, so they are shared. A
//! tree is used by one thread at a time, but must be able to move between
//! threads (`Send`), which rules out `Rc<RefCell<_>>`. [`Lock`] is the
//! cheapest cell that allows it: an exclusive flag taken with one atomic
//! swap and released with one store. On the data path it is never
//! contended; when it is (a sink shared by trees on two threads), a
//! borrow waits, yielding, until the other thread lets go. A second borrow
//! on the thread that holds the first would wait for ever: it panics
//! instead, naming the mistake, as `RefCell` does.

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// This thread's tag: never 0.
#[inline]
fn thread_tag() -> usize {
    thread_local! {
        /// A byte whose address tells the threads apart (unique while its thread lives).
        static THREAD_TAG: u8 = const { 0 };
    }
    THREAD_TAG.with(|t| t as *const u8 as usize)
}

/// A shared component: see the [module docs](self).
pub type Shared<T> = Arc<Lock<T>>;

/// Wraps a value for sharing between components.
pub fn shared<T>(v: T) -> Shared<T> {
    Arc::new(Lock::new(v))
}

/// A cell giving one borrower at a time exclusive access to its value, on
/// any thread. Like a mutex without poisoning: a borrow on another thread
/// waits for the first to end. Like `RefCell`, a second borrow on the
/// thread that holds one panics (it could never be granted).
pub struct Lock<T: ?Sized> {
    /// 0 when free, else the tag of the thread holding the value: taken and
    /// named in one atomic step, so a waiter that finds its own tag there is
    /// the holder.
    holder: AtomicUsize,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through a `LockGuard`, and at most one
// guard exists at a time (the `holder` word, taken with Acquire and
// released with Release, orders each borrower's accesses after the
// previous one's). So sharing a `Lock` between threads hands the value
// from thread to thread, which needs `T: Send`, never `T: Sync`.
unsafe impl<T: ?Sized + Send> Send for Lock<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send> Sync for Lock<T> {}

impl<T> Lock<T> {
    /// A new, unlocked cell.
    pub const fn new(value: T) -> Lock<T> {
        Lock {
            holder: AtomicUsize::new(0),
            value: UnsafeCell::new(value),
        }
    }

    /// The value, out of the cell.
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

impl<T: ?Sized> Lock<T> {
    /// Borrows the value if no one else holds it (for tests: whether the
    /// lock is held).
    #[cfg(test)]
    pub(crate) fn try_borrow_mut(&self) -> Option<LockGuard<'_, T>> {
        self.take(thread_tag()).then_some(LockGuard {
            lock: self,
            _value: PhantomData,
        })
    }

    /// Takes the value for the thread tagged `tag` if it is free.
    #[inline]
    fn take(&self, tag: usize) -> bool {
        self.holder
            .compare_exchange(0, tag, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Borrows the value exclusively until the guard is dropped, waiting
    /// while another thread holds it.
    ///
    /// # Panics
    /// When this thread holds it already (a guard kept across another
    /// borrow of the same value), which would otherwise never return.
    #[inline]
    pub fn borrow_mut(&self) -> LockGuard<'_, T> {
        let tag = thread_tag();
        if !self.take(tag) {
            self.wait(tag);
        }
        LockGuard {
            lock: self,
            _value: PhantomData,
        }
    }

    /// The same as [`borrow_mut`](Self::borrow_mut): there are no shared
    /// borrows. Named for the many read-only uses.
    #[inline]
    pub fn borrow(&self) -> LockGuard<'_, T> {
        self.borrow_mut()
    }

    #[cold]
    fn wait(&self, tag: usize) {
        // Only this thread puts its tag there, in the step that takes the
        // value: finding it means this thread holds the value already.
        if self.holder.load(Ordering::Relaxed) == tag {
            panic!(
                "coresight_decode::shared::Lock: already borrowed on this thread \
                 (a guard is still held where the value is borrowed again)"
            );
        }
        loop {
            std::thread::yield_now();
            if self.holder.load(Ordering::Relaxed) == 0 && self.take(tag) {
                return;
            }
        }
    }
}

impl<T: Default> Default for Lock<T> {
    fn default() -> Self {
        Lock::new(T::default())
    }
}

impl<T: ?Sized> fmt::Debug for Lock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Lock { .. }")
    }
}

/// Exclusive access to a [`Lock`]'s value; released when dropped.
///
/// The guard gives `&T` through a shared reference to it, so it may be
/// shared between threads only when `T` itself may be (`T: Sync`); a
/// guard over a `Cell` stays on its thread:
///
/// ```compile_fail
/// use std::cell::Cell;
/// use coresight_decode::shared::Lock;
/// let lock = Lock::new(Cell::new(0u64));
/// let guard = lock.borrow_mut();
/// std::thread::scope(|s| {
///     s.spawn(|| guard.set(guard.get() + 1));
///     guard.set(guard.get() + 1);
/// });
/// ```
pub struct LockGuard<'a, T: ?Sized> {
    lock: &'a Lock<T>,
    // Send and Sync as `&mut T` is: `Sync` only for `T: Sync`. Without
    // it the guard would be `Sync` whenever `T: Send`, letting two
    // threads reach a `Cell` at once.
    _value: PhantomData<&'a mut T>,
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for LockGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl<T: ?Sized> Deref for LockGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (see `Lock`).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T: ?Sized> DerefMut for LockGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard is the only one (see `Lock`).
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T: ?Sized> Drop for LockGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.holder.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_borrower_at_a_time() {
        let s = shared(5);
        {
            let mut g = s.borrow_mut();
            *g += 1;
            assert!(s.try_borrow_mut().is_none());
        }
        assert_eq!(*s.try_borrow_mut().unwrap(), 6);
    }

    /// Borrowing again on the thread that holds the value panics with the
    /// reason, as `RefCell` does, instead of waiting for ever.
    #[test]
    #[should_panic(expected = "already borrowed on this thread")]
    fn a_second_borrow_on_one_thread_panics() {
        let c = shared((1, 2));
        let s = format!("{} {}", c.borrow().0, c.borrow().1);
        assert_eq!(s, "never");
    }

    #[test]
    fn threads_take_turns() {
        let s = shared(0u64);
        std::thread::scope(|sc| {
            for _ in 0..4 {
                sc.spawn(|| {
                    for _ in 0..10_000 {
                        *s.borrow_mut() += 1;
                    }
                });
            }
        });
        assert_eq!(*s.borrow(), 40_000);
    }

    #[test]
    fn unsized_values_coerce() {
        let s: Shared<Vec<u8>> = shared(vec![1, 2]);
        let d: Shared<dyn std::any::Any + Send> = s.clone();
        assert!(d.borrow().downcast_ref::<Vec<u8>>().is_some());
    }
}
