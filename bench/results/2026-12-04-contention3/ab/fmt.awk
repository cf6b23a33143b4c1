{ if ($3=="before:") { printf "%s %s run %.1fms rqwait %.1fms slices %d vol %d invol %d\n", $1,$2, ($10-$4)/1e6, ($11-$5)/1e6, $12-$6, $13-$7, $14-$8 } else print }
