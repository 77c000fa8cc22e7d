/* driver.h — finding the CUDA driver and NVRTC at run time (dlopen), so splat loads
 * and runs its CPU backend on machines with neither. */
#ifndef SPLAT_CUDA_DRIVER_H
#define SPLAT_CUDA_DRIVER_H

#include <stddef.h>

#include "splat.h"

/* Fills the CUDA fields of env (cuda_*, nvrtc_*, device_*). Returns SPLAT_OK when a
 * driver and a device are usable; otherwise SPLAT_ERR_NO_DEVICE with the reason in
 * the thread's last error and in why (host, cap chars, may be NULL). */
splat_status splat__cuda_probe(splat_environment *env, char *why, size_t cap);

#endif
