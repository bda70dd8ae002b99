/// Tags every allocation with the instance (if any) it is made for, so that the
/// host memory a guest makes wedge hold counts against its budget.
#[global_allocator]
static ALLOCATOR: wedge::host::limits::host_memory::HostAllocator =
    wedge::host::limits::host_memory::HostAllocator;

fn main() -> std::process::ExitCode {
    wedge::cli::main()
}
