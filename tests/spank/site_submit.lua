-- A site's submit filter for tests/spank/shapes_refused.sh (slurmctld
-- runs it as job_submit.lua, JobSubmitPlugins=lua): a job named "fixed"
-- keeps the node count it was submitted with; Slurm refuses any change.
function slurm_job_submit(job_desc, part_list, submit_uid)
	return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	if job_rec.name == "fixed" and job_desc.min_nodes ~= slurm.NO_VAL and
	   job_desc.min_nodes ~= job_rec.min_nodes then
		slurm.log_info("site_submit.lua: job %u keeps its node count",
			       job_rec.job_id)
		return slurm.ERROR
	end
	return slurm.SUCCESS
end
