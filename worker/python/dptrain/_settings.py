# The variables srun --dp-train exports to every task, by setting: the
# rows of common/settings.def, as tests/unit/test_setting_names writes
# them (it prints this file anew when a row changes).
ENV = {
    "RUN": "DPTRAIN_RUN",
    "CKPT_URI": "DPTRAIN_CKPT_URI",
    "CKPT_EVERY": "DPTRAIN_CKPT_EVERY",
    "KEEP": "DPTRAIN_KEEP",
    "GRACE": "DPTRAIN_GRACE",
    "REQUEUE": "DPTRAIN_REQUEUE",
    "MAX_REQUEUES": "DPTRAIN_MAX_REQUEUES",
    "MIN_WORKERS": "DPTRAIN_MIN_WORKERS",
    "BACKEND": "DPTRAIN_BACKEND",
    "LOG_LEVEL": "DPTRAIN_LOG_LEVEL",
    "GPU_BIND": "DPTRAIN_GPU_BIND",
    "PRIVATE": "DPTRAIN_PRIVATE",
    "MTBF": "DPTRAIN_MTBF",
    "MIN_CKPT_INTERVAL": "DPTRAIN_MIN_CKPT_INTERVAL",
    "RESTART_COUNT": "DPTRAIN_RESTART_COUNT",
}
