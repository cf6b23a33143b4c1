set terminal pngcairo noenhanced size 1400,1000 font 'DejaVu Sans,10'
set output 'bench/results/2026-12-04-libfabric-peers/one-host-tcp/busbw.png'
set datafile missing '?'
set logscale x 2
set logscale y
set grid
set format y '%g'
set key top left font ',9'
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "64K" 65536, "1M" 1048576, "16M" 16777216, "64M" 67108864) rotate by -45
set xlabel 'message size (bytes)'
set multiplot layout 2,1 title 'all_reduce float sum, in place, busbw (median of repeats)'
set title 'shm class, 2 ranks'
set ylabel 'busbw (GB/s)'
set xrange [5.333333333333333:100663296.0]
plot 'bench/results/2026-12-04-libfabric-peers/one-host-tcp/plotdata/shm_2.dat' using 1:2 with lines dt 2 lw 1.5 lc rgb 'black' title 'fi_pingpong shm'
set title 'tcp class, 2 ranks'
set ylabel 'busbw (GB/s)'
set xrange [5.333333333333333:100663296.0]
plot 'bench/results/2026-12-04-libfabric-peers/one-host-tcp/plotdata/tcp_2.dat' using 1:2 with linespoints lw 3 lc rgb '#d62728' pt 7 title 'DirectCCL', \
     'bench/results/2026-12-04-libfabric-peers/one-host-tcp/plotdata/tcp_2.dat' using 1:3 with linespoints lw 1.5 lc rgb '#1f77b4' pt 5 title 'Open MPI', \
     'bench/results/2026-12-04-libfabric-peers/one-host-tcp/plotdata/tcp_2.dat' using 1:4 with linespoints lw 1.5 lc rgb '#2ca02c' pt 9 title 'MPICH', \
     'bench/results/2026-12-04-libfabric-peers/one-host-tcp/plotdata/tcp_2.dat' using 1:5 with linespoints lw 1.5 lc rgb '#9467bd' pt 11 title 'Gloo ring', \
     'bench/results/2026-12-04-libfabric-peers/one-host-tcp/plotdata/tcp_2.dat' using 1:6 with linespoints lw 1.5 lc rgb '#8c564b' pt 13 title 'Gloo halving-doubling', \
     'bench/results/2026-12-04-libfabric-peers/one-host-tcp/plotdata/tcp_2.dat' using 1:7 with linespoints lw 1.5 lc rgb '#ff7f0e' pt 15 title 'Intel MPI', \
     'bench/results/2026-12-04-libfabric-peers/one-host-tcp/plotdata/tcp_2.dat' using 1:8 with linespoints lw 1.5 lc rgb '#17becf' pt 17 title 'oneCCL', \
     'bench/results/2026-12-04-libfabric-peers/one-host-tcp/plotdata/tcp_2.dat' using 1:16 with lines dt 2 lw 1.5 lc rgb 'black' title 'fi_pingpong tcp;ofi_rxm'
unset multiplot
