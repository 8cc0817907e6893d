//! The multi-process launcher the data-parallel tests share: the `nest` binary started the way
//! torchrun starts it (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) on loopback, and
//! the ranks waited for with a deadline. Used as `mod support;` from each test file.

#![allow(dead_code)] // each test file compiles its own copy and uses part of it

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port free on loopback now (the rendezvous of one job).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The `nest` binary with `args`: float32, one thread, collectives timing out after
/// `dist_timeout_s` (NEST_DIST_TIMEOUT_S), stdout dropped and stderr captured; `env` is added.
pub fn nest(args: &[String], dist_timeout_s: u64, env: &[(&str, String)]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nest"));
    c.args(args)
        .env("NEST_DTYPE", "float32")
        .env("OMP_NUM_THREADS", "1")
        .env("NEST_DIST_TIMEOUT_S", dist_timeout_s.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// Starts `world` ranks of one job ([`nest`] with `args`), rendezvous on a free loopback port.
pub fn launch(world: usize, args: &[String], dist_timeout_s: u64) -> Vec<Child> {
    let port = free_port().to_string();
    (0..world)
        .map(|rank| {
            let env = [
                ("WORLD_SIZE", world.to_string()),
                ("RANK", rank.to_string()),
                ("LOCAL_RANK", rank.to_string()),
                ("MASTER_ADDR", "127.0.0.1".to_string()),
                ("MASTER_PORT", port.clone()),
            ];
            nest(args, dist_timeout_s, &env).spawn().unwrap()
        })
        .collect()
}

/// Waits for every child (SIGKILL to any still running at `deadline`, counted from now):
/// whether each succeeded, and its stderr.
pub fn finish(children: Vec<Child>, deadline: Duration) -> Vec<(bool, String)> {
    let start = Instant::now();
    children
        .into_iter()
        .map(|mut c| {
            while c.try_wait().unwrap().is_none() && start.elapsed() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            c.kill().ok();
            let out = c.wait_with_output().unwrap();
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        })
        .collect()
}
