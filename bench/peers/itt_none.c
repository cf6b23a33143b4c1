/* oneCCL's CPU archive (PyPI's oneccl-cpu-devel) calls Intel's ITT tracing API
 * through these function pointers, which ittnotify's static library defines and
 * sets to NULL when no collector (VTune) is attached; that library is not
 * shipped. Every call site tests its pointer for NULL, so without a collector
 * nothing is traced, as with the library. */
void* __itt_domain_create_ptr__3_0 = 0;
void* __itt_event_create_ptr__3_0 = 0;
void* __itt_event_end_ptr__3_0 = 0;
void* __itt_event_start_ptr__3_0 = 0;
void* __itt_metadata_add_ptr__3_0 = 0;
void* __itt_string_handle_create_ptr__3_0 = 0;
void* __itt_task_begin_ptr__3_0 = 0;
void* __itt_task_end_ptr__3_0 = 0;
void* __itt_thread_set_name_ptr__3_0 = 0;
