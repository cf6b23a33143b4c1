set terminal pngcairo noenhanced size 1400,1000 font 'DejaVu Sans,10'
set output 'bench/results/2026-12-04-libfabric-peers/one-host-tcp/latency.png'
set datafile missing '?'
set logscale x 2
set logscale y
set grid
set format y '%g'
set key top left font ',9'
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "64K" 65536, "1M" 1048576, "16M" 16777216, "64M" 67108864) rotate by -45
set xlabel 'message size (bytes)'
set multiplot layout 2,1 title 'all_reduce float sum, in place, time per call (median of repeats)'
set title 'shm class, 2 ranks'
set ylabel 'time per allreduce (us)'
set xrange [5.333333333333333:1572864.0]
plot 
set title 'tcp class, 2 ranks'
set ylabel 'time per allreduce (us)'
set xrange [5.333333333333333:1572864.0]
plot 'bench/results/2026-12-04-libfabric-peers/one-host-tcp/plotdata/tcp_2.dat' using 1:9 with linespoints lw 3 lc rgb '#d62728' pt 7 title 'DirectCCL', \
     'bench/results/2026-12-04-libfabric-peers/one-host-tcp/plotdata/tcp_2.dat' using 1:10 with linespoints lw 1.5 lc rgb '#1f77b4' pt 5 title 'Open MPI', \
     'bench/results/2026-12-04-libfabric-peers/one-host-tcp/plotdata/tcp_2.dat' using 1:11 with linespoints lw 1.5 lc rgb '#2ca02c' pt 9 title 'MPICH', \
     'bench/results/2026-12-04-libfabric-peers/one-host-tcp/plotdata/tcp_2.dat' using 1:12 with linespoints lw 1.5 lc rgb '#9467bd' pt 11 title 'Gloo ring', \
     'bench/results/2026-12-04-libfabric-peers/one-host-tcp/plotdata/tcp_2.dat' using 1:13 with linespoints lw 1.5 lc rgb '#8c564b' pt 13 title 'Gloo halving-doubling', \
     'bench/results/2026-12-04-libfabric-peers/one-host-tcp/plotdata/tcp_2.dat' using 1:14 with linespoints lw 1.5 lc rgb '#ff7f0e' pt 15 title 'Intel MPI', \
     'bench/results/2026-12-04-libfabric-peers/one-host-tcp/plotdata/tcp_2.dat' using 1:15 with linespoints lw 1.5 lc rgb '#17becf' pt 17 title 'oneCCL'
unset multiplot
