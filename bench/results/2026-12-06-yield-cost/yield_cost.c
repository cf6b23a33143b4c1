#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int main(){cpu_set_t s;CPU_ZERO(&s);CPU_SET(0,&s);sched_setaffinity(0,sizeof s,&s);
double mx=0,sum=0;int n=2000,big=0;for(int i=0;i<n;i++){double a=now();sched_yield();double d=now()-a;sum+=d;if(d>mx)mx=d;if(d>1000)big++;}
printf("yield: mean %.1f us max %.0f us, >1ms %d of %d\n",sum/n,mx,big,n);}
