//! How far apart back-to-back medians of one unchanged call fall, and whether what the
//! benchmark does between rows (idle time, other allocations, a fresh upload, large
//! copies, the read-floor kernel) moves them: `Gemm::time` (50 calls, each after an L2
//! flush) of sm90v2 on one problem, twelve times in one process.
//!
//! On a GPU machine: `cargo run --release -p host --example median_spread -- 128x7168x16384`.
//! (docs/perf-notes.md, session 30: on an H100 the twelve medians of 128x7168x16384 spread
//! over 59.66-61.60 us, one at 63.90.)

use host::error::CudaContext as _;
use host::gemm::DeviceProblem;
use host::generate::{Distribution, generate};
use host::{Gemm, Gpu, Kernel};
use std::time::Duration;

fn main() -> host::Result<()> {
    let shape = std::env::args().nth(1).unwrap_or_else(|| "128x7168x16384".into());
    let shape: nvfp4::Shape =
        shape.parse().map_err(|e| host::Error::Usage(format!("`{shape}` is not a shape MxNxK[xL]: {e}")))?;
    let gpu = Gpu::open(0)?;
    let gemm = Gemm::new(&gpu, Kernel::Sm90v2)?;
    let problem = generate(shape, Distribution::GpuMode, 1);
    let time = |label: &str, d: &mut DeviceProblem| -> host::Result<()> {
        let t = gemm.time(d, 50)?;
        println!("{label:<44} median {:>8.2} us (min {:.2})", t.median_us, t.min_us);
        Ok(())
    };
    let upload = || -> host::Result<DeviceProblem> {
        let mut d = gemm.upload(&problem)?;
        gemm.run(&mut d)?;
        Ok(d)
    };
    let s = &gpu.stream;

    let mut first = upload()?;
    time("right after the first run", &mut first)?;
    time("again", &mut first)?;
    std::thread::sleep(Duration::from_secs(2));
    time("after 2 s idle", &mut first)?;
    // A buffer allocated before the problem, as the bench's flush buffer is.
    let early = s.alloc_zeros::<u8>(2 * gpu.info.l2_bytes as usize).context("allocating a 2 x L2 buffer")?;
    let mut second = upload()?;
    time("a second upload, after a 2 x L2 buffer", &mut second)?;
    time("the first upload", &mut first)?;
    drop(early);
    // Device copies, as the bench's bandwidth limit runs them.
    let src = s.alloc_zeros::<u16>(1 << 30).context("allocating the copy source")?;
    let mut dst = s.alloc_zeros::<u16>(1 << 30).context("allocating the copy destination")?;
    for _ in 0..22 {
        s.memcpy_dtod(&src, &mut dst).context("device-to-device copy")?;
    }
    s.synchronize().context("waiting for the stream")?;
    time("after 22 copies of 2 GiB", &mut first)?;
    time("the second upload", &mut second)?;
    drop((src, dst));
    // The bench's read floor: a plain read of the problem's bytes.
    let bytes: Vec<u8> = [&problem.b[..], &problem.sfb, &problem.a, &problem.sfa].concat();
    let reader = host::stream::Reader::new(&gpu, &host::stream::padded(bytes))?;
    for _ in 0..52 {
        reader.launch()?;
    }
    s.synchronize().context("waiting for the stream")?;
    time("after the read floor (its buffer alive)", &mut first)?;
    time("the second upload", &mut second)?;
    drop(reader);
    time("with the read floor's buffer freed", &mut first)?;
    let mut third = upload()?;
    time("a third upload", &mut third)?;
    time("the first upload", &mut first)?;
    Ok(())
}
