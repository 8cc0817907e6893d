//! The recording bookkeeping on the CPU fake: order of calls, failed bodies, turns.
use super::*;
use tch::{Kind, Tensor};

struct Doubler {
    x: Tensor,
    y: Tensor,
}

fn body(s: &Doubler) -> Result<()> {
    s.y.shallow_clone().copy_(&(&s.x * 2.0));
    Ok(())
}

/// The fake runs the body at every pass: the outputs follow the inputs copied in.
#[test]
fn the_fake_replays_by_running_the_body_on_the_static_tensors() {
    let state = Doubler {
        x: Tensor::from_slice(&[1.0f32, 2.0]),
        y: Tensor::zeros([2], (Kind::Float, Device::Cpu)),
    };
    let passes = std::cell::Cell::new(0);
    let mut counted = |s: &Doubler| {
        passes.set(passes.get() + 1);
        body(s)
    };
    let mut pool = Pool::new(Device::Cpu);
    let mut c = Captured::record(&mut pool, state, 2, &mut counted)
        .map_err(|f| f.error)
        .unwrap();
    assert!(!c.records());
    assert_eq!(
        passes.get(),
        2,
        "two warm-up passes; the recorded one does not run"
    );
    c.state
        .x
        .shallow_clone()
        .copy_(&Tensor::from_slice(&[5.0f32, -1.0]));
    c.run(&mut counted).unwrap();
    assert_eq!(Vec::<f32>::try_from(&c.state.y).unwrap(), [10.0, -2.0]);
    assert_eq!(passes.get(), 3);
}

/// Calls out of order are refused, and a body that fails in its warm-up leaves the side
/// stream and hands the state back with the body's error.
#[test]
fn out_of_order_calls_and_failed_bodies_are_errors() {
    let mut g = Eager::default();
    assert!(g.begin().is_err(), "begin before enter");
    assert!(g.replay().is_err(), "replay before a recording");
    g.enter().unwrap();
    assert!(g.enter().is_err());
    g.begin().unwrap();
    assert!(g.leave().is_err(), "leave while recording");
    g.end().unwrap();
    g.leave().unwrap();
    assert_eq!(g.replay().unwrap(), Replay::RunBody);
    let mut failing =
        |_: &()| -> Result<()> { Err(Error::Core(nest_core::Error::value("body", "planted"))) };
    let f = Captured::record_with(Box::new(Eager::default()), (), 1, &mut failing)
        .err()
        .unwrap();
    assert!(
        f.error.to_string().contains("planted") && !f.warmed,
        "{}",
        f.error
    );
}

/// The fake, counting the threads between `enter` and `leave` at once.
struct Counted {
    inner: Eager,
    inside: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    most: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl StepGraph for Counted {
    fn enter(&mut self) -> Result<()> {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.inside.fetch_add(1, SeqCst) + 1;
        self.most.fetch_max(now, SeqCst);
        self.inner.enter()
    }
    fn leave(&mut self) -> Result<()> {
        self.inside
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.leave()
    }
    fn begin(&mut self) -> Result<()> {
        self.inner.begin()
    }
    fn end(&mut self) -> Result<()> {
        self.inner.end()
    }
    fn replay(&mut self) -> Result<Replay> {
        self.inner.replay()
    }
    fn records(&self) -> bool {
        // run the body inside the capture too, to stretch it
        true
    }
}

/// Four threads recording at once (a server's workers on one GPU) take turns: never two
/// between `enter` and `leave` (they would share the side stream); a recording inside a
/// recording's body is an error, not a deadlock.
#[test]
fn one_thread_records_at_a_time() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    let (inside, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (inside, most) = (inside.clone(), most.clone());
            std::thread::spawn(move || {
                let g = Counted {
                    inner: Eager::default(),
                    inside,
                    most,
                };
                let mut slow = |_: &()| -> Result<()> {
                    std::thread::sleep(std::time::Duration::from_millis(30));
                    Ok(())
                };
                Captured::record_with(Box::new(g), (), 1, &mut slow)
                    .map(|_| ())
                    .map_err(|f| f.error.to_string())
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    assert_eq!(most.load(SeqCst), 1, "two threads recorded at once");
    let mut nested = |_: &()| -> Result<()> {
        let mut inner = |_: &()| Ok(());
        Captured::record_with(Box::new(Eager::default()), (), 0, &mut inner)
            .map(|_| ())
            .map_err(|f| f.error)
    };
    let f = Captured::record_with(Box::new(Eager::default()), (), 1, &mut nested)
        .err()
        .expect("a nested recording fails");
    assert!(
        f.error.to_string().contains("inside another"),
        "{}",
        f.error
    );
    // the turn is given back after a failure
    let mut fine = |_: &()| Ok(());
    assert!(Captured::record_with(Box::new(Eager::default()), (), 1, &mut fine).is_ok());
}

#[test]
fn no_peak_memory_on_the_cpu() {
    assert_eq!(peak_memory(Device::Cpu), None);
    reset_peak_memory(Device::Cpu);
}
