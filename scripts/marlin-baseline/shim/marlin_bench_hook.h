#pragma once
// marlin-bench: reporting hook called by the (generated) marlin_host.cu right
// before each Marlin kernel launch. Defined in harness.cu.
void marlin_bench_on_launch(int prob_m_split, int thread_m_blocks,
                            int m_block_size_8, int thread_k, int thread_n,
                            int num_threads, int blocks, int smem_bytes);
