//! Pure instruction models: no threads, no memory. Each function maps instruction operands (and,
//! for the tensor core and the tensor-map copies, the operand *layout*) to results or to address
//! plans, following the PTX ISA. The emulator core owns threads, shared/global memory, barriers
//! and asynchronous completion, and calls these models.
//!
//! The models know nothing about NVFP4 and do not use the project's `nvfp4` crate: they are an
//! independent reading of the ISA, so tests can cross-check the project's descriptor and
//! tensor-map builders against them.
//!
//! Citations name PTX ISA sections by number (the 8.x/9.x numbering the design notes use) and
//! by title; the title is the stable reference when numbers shift between ISA versions.

pub mod integer;
pub mod numeric;
pub mod tcgen05;
pub mod tensor_map;
pub mod wgmma;
