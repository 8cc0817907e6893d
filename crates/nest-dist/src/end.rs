//! How a process group ends ([`End`]): what a drop does per engine, and the other ways, which
//! `crates/nest-dist/tests/group.rs` runs on a GPU to place a crash at the end.

use crate::Backend;

/// How a [`Group`](crate::Group) ends: its engine shut down (its threads stopped, its communicators
/// released) and its memory freed, or either alone, or neither (left to the process's exit).
/// A dropped group ends as [`End::for_backend`] says; [`Group::end`](crate::Group::end) picks
/// another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    ShutdownAndFree,
    Shutdown,
    Free,
    Leak,
}

impl End {
    /// What a dropped group of `backend` does: Gloo's is shut down and freed; NCCL's is shut
    /// down (its threads stopped, its communicators released) and its memory left to the
    /// process's exit. Freeing a `ProcessGroupNCCL` crashed the process (SIGSEGV), shut down
    /// first or not and without its heartbeat monitor too, while shut down alone it exited
    /// cleanly (one rank, H200, torch 2.11, NCCL 2.28.9, 2026-11-29: `nccl_one_rank_on_the_gpu`
    /// under each `NEST_TEST_NCCL_END`). A process ends its group as it leaves (a run's end):
    /// the memory kept is one group's.
    pub fn for_backend(backend: Backend) -> End {
        match backend {
            Backend::Gloo => End::ShutdownAndFree,
            Backend::Nccl(_) => End::Shutdown,
        }
    }

    /// `NEST_TEST_NCCL_END`'s names: `plain` (shut down and freed), `shutdown`, `free`, `leak`.
    pub fn parse(name: &str) -> Option<End> {
        Some(match name {
            "plain" => End::ShutdownAndFree,
            "shutdown" => End::Shutdown,
            "free" => End::Free,
            "leak" => End::Leak,
            _ => return None,
        })
    }

    pub(crate) fn bits(self) -> std::os::raw::c_int {
        match self {
            End::ShutdownAndFree => 3,
            End::Shutdown => 1,
            End::Free => 2,
            End::Leak => 0,
        }
    }
}
