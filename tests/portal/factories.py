"""factory_boy factories for the portal's models; the named people live in conftest.py."""

from __future__ import annotations

import uuid
from datetime import timedelta

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from portal.accounts.models import Membership, Team
from portal.problems.models import Category, Problem
from portal.submissions.models import ProblemResult, Submission
from tests.portal.bundles import solving


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ["username"]

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("correct-horse-battery")


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team

    name = factory.Sequence(lambda n: f"Team {n}")
    slug = factory.Sequence(lambda n: f"team-{n}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    team = factory.SubFactory(TeamFactory)
    role = Membership.Role.MEMBER


class ProblemFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Problem
        django_get_or_create = ["slug"]

    slug = factory.Sequence(lambda n: f"problem-{n}")
    title = factory.LazyAttribute(lambda p: p.slug.replace("-", " ").capitalize())
    category = Category.COLLECTIVE
    signature = "solution(x: torch.Tensor) -> torch.Tensor"
    description = "Every rank holds a vector. Return the sum over ranks."
    reference_source = "def solution(x):\n    dist.all_reduce(x)\n    return x\n"
    world_sizes = [2, 4, 8]
    dtypes = ["float32", "bfloat16"]
    code_version = "abc123"


class SubmissionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Submission

    team = factory.SubFactory(TeamFactory)
    user = factory.SubFactory(UserFactory)
    problems = factory.LazyFunction(lambda: ["all-reduce"])
    bundle = factory.django.FileField(filename="bundle.zip", data=solving("all-reduce"))
    bundle_name = "bundle.zip"
    bundle_sha256 = "0" * 64
    profile = "cpu"
    status = Submission.Status.QUEUED
    evaluation_id = factory.LazyFunction(uuid.uuid4)
    queued_at = factory.LazyFunction(timezone.now)

    class Params:
        running = factory.Trait(
            status=Submission.Status.RUNNING,
            host="gpu-host-1",
            started_at=factory.LazyFunction(timezone.now),
            heartbeat_at=factory.LazyFunction(timezone.now),
        )
        done = factory.Trait(
            status=Submission.Status.DONE,
            started_at=factory.LazyFunction(lambda: timezone.now() - timedelta(minutes=1)),
            finished_at=factory.LazyFunction(timezone.now),
        )


class ProblemResultFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ProblemResult

    submission = factory.SubFactory(SubmissionFactory, done=True)
    problem = factory.SubFactory(ProblemFactory)
    problem_version = factory.LazyAttribute(lambda r: r.problem.version)  # judged at today's
    status = ProblemResult.Status.PASSED
    world_size = 4
    time_us = 100.0
    ref_time_us = 150.0
    speedup = 1.5
    max_abs_err = 0.0
    max_rel_err = 0.0
