fn main() -> std::process::ExitCode {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        // Large blocks (a big file's text and syntax tree) come from and go back to the system,
        // not kept in the allocator's arenas after the file is done: peak memory then follows
        // the largest files checked at once, not how many were checked.
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
    gpulint::cli::main()
}
