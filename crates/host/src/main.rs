//! `host`: run, verify and time the NVFP4 GEMM kernels. See `host --help`.

fn main() {
    std::process::exit(host::cli::main());
}
